import Foundation
import Funnels
import Reports
import Testing

/// The renderers on a hand-made report with known numbers.
@Suite("report renderers")
struct RenderersTests {
    /// Three persons in a three-step funnel: one completes in 10 minutes, one
    /// stops at step 2, one is still inside its window at step 1.
    static func report() throws -> FunnelReport {
        let configuration = try FunnelConfiguration.parse(
            yaml: """
                apps: [{name: shop}]
                funnels:
                  - name: checkout, "quoted"
                    app: shop
                    steps: [{event: cart}, {event: pay}, {event: done}]
                    targets: [{name: completion_rate, metric: completion_rate, threshold: 0.5}]
                """, source: "test.yaml")
        let funnel = try #require(configuration.funnels.first)
        let day: Int64 = 86_400_000_000
        let t0: Int64 = 20_000 * day
        func e(_ name: String, _ t: Int64, _ os: String) -> FunnelEvent {
            FunnelEvent(messageId: UUID().uuidString, kind: .track, name: name, timestamp: t, attributes: ["context.os.name": os])
        }
        let now = t0 + 2 * day
        let outcomes = [
            FunnelEvaluator.evaluate(events: [e("cart", t0, "iOS"), e("pay", t0 + 60_000_000, "iOS"), e("done", t0 + 600_000_000, "iOS")], funnel: funnel, now: now),
            FunnelEvaluator.evaluate(events: [e("cart", t0, "Android"), e("pay", t0 + 120_000_000, "Android")], funnel: funnel, now: now),
            FunnelEvaluator.evaluate(events: [e("cart", now - 3_600_000_000, "iOS")], funnel: funnel, now: now),
        ]
        return FunnelReport(funnel: funnel, outcomes: outcomes, now: now, timeZone: TimeZone(identifier: "UTC") ?? .gmt)
    }

    static let range = ReportRange(from: nil, to: nil, generatedAt: "2026-11-22T00:00:00Z")

    @Test("JSON carries the SPEC's fields with the right numbers")
    func json() throws {
        let text = ReportFormat.json.render([try Self.report()], range: Self.range)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let funnel = try #require((document["funnels"] as? [[String: Any]])?.first)
        #expect(funnel["funnel"] as? String == "checkout, \"quoted\"")
        let steps = try #require(funnel["steps"] as? [[String: Any]])
        #expect(steps.map { $0["persons"] as? Int } == [3, 2, 1])
        #expect(steps.map { $0["drop_off"] as? Int } == [0, 1, 0])  // the in-progress person is not a drop-off
        #expect(steps[1]["conversion_from_previous"] as? Double == 2.0 / 3.0)
        #expect(steps[0]["median_seconds_from_previous"] is NSNull)
        #expect(steps[1]["median_seconds_from_previous"] as? Double == 90)
        let ttc = try #require(funnel["time_to_complete_seconds"] as? [String: Any])
        #expect(ttc["median"] as? Double == 600)
        let target = try #require((funnel["targets"] as? [[String: Any]])?.first)
        #expect(target["met"] as? Bool == false)
        #expect(target["threshold"] as? Double == 0.5)
        let cohorts = try #require(funnel["cohorts"] as? [[String: Any]])
        #expect(cohorts.map { $0["in_progress"] as? Bool } == [false, true])
        let os = try #require((funnel["breakdowns"] as? [String: Any])?["context.os.name"] as? [[String: Any]])
        #expect(Set(os.compactMap { $0["value"] as? String }) == ["iOS", "Android"])
    }

    @Test("the terminal table aligns steps with bars, shows completion, targets and cohorts")
    func table() throws {
        let text = ReportFormat.table.render([try Self.report()], range: Self.range)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines[0] == "Regressions: none found")
        #expect(lines[1].hasPrefix("checkout, \"quoted\" (app shop) — window 24h"))
        let stepLines = lines.filter { $0.hasPrefix("  1 ") || $0.hasPrefix("  2 ") || $0.hasPrefix("  3 ") }
        #expect(stepLines.count == 3)
        #expect(Set(stepLines.map(\.count)).count == 1)  // aligned columns
        #expect(stepLines[0].contains("████████████████████████"))
        #expect(text.contains("completion 33.3%"))
        #expect(text.contains("MISSED completion_rate: 33.3% (target ≥ 50%)"))
        #expect(text.contains("in progress"))
        #expect(text.contains("median 10m 0s"))
    }

    @Test("CSV quotes fields that need it; markdown has a table per section")
    func csvAndMarkdown() throws {
        let report = try Self.report()
        let sections = ReportFormat.csv.render([report], range: Self.range).components(separatedBy: "\n\n")
        #expect(sections[0].hasPrefix("direction,funnel,kind,metric,step,baseline_label"))
        let csv = sections[1].split(separator: "\n")
        #expect(csv.count == 4)
        #expect(csv[1].hasPrefix("\"checkout, \"\"quoted\"\"\",shop,1,cart,false,3,"))
        let markdown = ReportFormat.markdown.render([report], range: Self.range)
        #expect(markdown.contains("| 2 | pay | 2 | 66.7% | 66.7% | 1 | 0 | 1m 30s |"))
        #expect(markdown.contains("| cohort day | started | completed | rate | status |"))
    }
}
