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
        var report = FunnelReport(funnel: funnel, outcomes: outcomes, now: now, timeZone: TimeZone(identifier: "UTC") ?? .gmt)
        report.retention = Self.retention(cohortDay: report.cohorts[0].day)
        return report
    }

    /// D1: 30 of 40 completers against 10 of 40 others; D30: nobody's day has passed.
    static func retention(cohortDay: String) -> RetentionReport {
        RetentionReport(days: [1, 30], cells: [cohortDay: [
            RetentionCell(day: 1, completed: true, counts: RetentionSide(eligible: 40, retained: 30)),
            RetentionCell(day: 1, completed: false, counts: RetentionSide(eligible: 40, retained: 10)),
            RetentionCell(day: 30, completed: true, counts: RetentionSide(pending: 40)),
            RetentionCell(day: 30, completed: false, counts: RetentionSide(pending: 40)),
        ]])
    }

    static let range = ReportRange(from: nil, to: nil, generatedAt: "2026-11-22T00:00:00Z")

    @Test("JSON escapes quotes, backslashes and control characters, and keeps other text as it is")
    func jsonEscapes() throws {
        let name = "a \"b\" \\ c\n\r\t\u{1}\u{1F} é ✓"
        let configuration = try FunnelConfiguration.parse(
            yaml: """
                apps: [{name: shop}]
                funnels:
                  - name: "a \\"b\\" \\\\ c\\n\\r\\t\\u0001\\u001f é ✓"
                    app: shop
                    steps: [{event: cart}, {event: pay}]
                """, source: "test.yaml")
        let funnel = try #require(configuration.funnels.first)
        #expect(funnel.name == name)
        let report = FunnelReport(funnel: funnel, outcomes: [], now: 0, timeZone: .gmt)
        let text = ReportFormat.json.render([report], range: Self.range)
        #expect(text.contains(#""funnel":"a \"b\" \\ c\n\r\t\u0001\u001f é ✓""#))
        let document = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect((document["funnels"] as? [[String: Any]])?.first?["funnel"] as? String == name)
    }

    @Test("JSON carries the documented fields with the right numbers")
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
        // Retention (docs/funnels.md, "Retention"): each day, both sides, the difference and its p-value; pending days have no rate.
        let retention = try #require(funnel["retention"] as? [[String: Any]])
        #expect(retention.map { $0["day"] as? Int } == [1, 30])
        let completers = try #require(retention[0]["completers"] as? [String: Any])
        #expect(completers["eligible"] as? Int == 40 && completers["retained"] as? Int == 30 && completers["rate"] as? Double == 0.75)
        #expect((completers["ci95"] as? [Double])?.count == 2)
        #expect((retention[0]["non_completers"] as? [String: Any])?["rate"] as? Double == 0.25)
        #expect(retention[0]["difference"] as? Double == 0.5)
        let p = try #require(retention[0]["p_value"] as? Double)
        #expect(abs(p - erfc(0.5 / (0.25 * 2 / 40).squareRoot() / 2.0.squareRoot())) < 1e-15)  // pooled 0.5: se = √(0.25·2/40)
        let pending = try #require(retention[1]["completers"] as? [String: Any])
        #expect(pending["rate"] is NSNull && pending["pending"] as? Int == 40 && retention[1]["p_value"] is NSNull)
        #expect((cohorts[0]["retention"] as? [[String: Any]])?.count == 2)
        #expect((cohorts[1]["retention"] as? [[String: Any]])?.isEmpty == true)
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
        #expect(text.contains("  retention (active on day N after the start; 95% CI):"))
        let d1 = try #require(lines.first { $0.hasPrefix("    D1 ") })
        #expect(d1.contains("75.0% [") && d1.contains("of 40") && d1.contains("25.0% [") && d1.contains("+50.0 pts"))
        #expect(lines.contains { $0.hasPrefix("    D30 ") && $0.contains("pending (40)") })
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
        #expect(markdown.contains("| D30 | pending (40) | pending (40) | — | — |"))
        let retention = try #require(sections.first { $0.hasPrefix("funnel,cohort_day,day,outcome,eligible,retained") }).split(separator: "\n")
        #expect(retention.count == 1 + 4 + 4)  // the range, then its one cohort day
        #expect(retention[1].hasPrefix("\"checkout, \"\"quoted\"\"\",,1,completers,40,30,0,0.75,"))
    }

    @Test("a funnel's options are named under its title in every output, and in the JSON as fields")
    func optionsNamed() throws {
        let configuration = try FunnelConfiguration.parse(
            yaml: """
                apps: [{name: shop}]
                funnels:
                  - name: checkout
                    app: shop
                    order: strict
                    ignore: [{event: heartbeat}]
                    hold: [context.device.id]
                    attribution: last_step
                    steps: [{event: cart}, {event: pay, within: 2m}]
                """, source: "test.yaml")
        let funnel = try #require(configuration.funnels.first)
        let report = FunnelReport(funnel: funnel, outcomes: [], now: 0, timeZone: TimeZone(identifier: "UTC") ?? .gmt)
        let words = ["strict order (ignoring heartbeat)", "pay within 2m of the previous step", "held constant: context.device.id",
                     "breakdowns from the last step reached"]
        #expect(report.options == words)
        for format in [ReportFormat.table, .markdown] {
            let text = format.render([report], range: Self.range)
            #expect(words.allSatisfy(text.contains), "\(format)")
        }
        let html = HTMLDashboard(range: Self.range).render([DashboardFunnel(report: report, secondsToComplete: [])])
        #expect(html.allSatisfy { _, page in words.allSatisfy(page.contains) })
        let json = try #require(try JSONSerialization.jsonObject(with: Data(ReportFormat.json.render([report], range: Self.range).utf8)) as? [String: Any])
        let first = try #require((json["funnels"] as? [[String: Any]])?.first)
        #expect(first["order"] as? String == "strict" && first["hold"] as? [String] == ["context.device.id"])
        #expect(first["attribution"] as? String == "last_step")
        #expect(((first["steps"] as? [[String: Any]])?.map { $0["within_seconds"] as? Int }) == [nil, 120])
    }
}
