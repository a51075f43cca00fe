import Foundation
import Funnels

/// The one message `--notify` posts when a report finds a regression, an
/// instrumentation finding or a missed target: `text` for Slack and Mattermost incoming webhooks, plus the
/// structured lists (the JSON report's own shapes) for anything else.
enum AlertNotification {
    /// The message's JSON, or nil when there is nothing to tell.
    static func render(_ reports: [FunnelReport], range: ReportRange) -> String? {
        let (regressions, improvements) = RegressionText.all(reports)
        let missed = reports.flatMap { r in r.targets.filter { !$0.met }.map { (r.funnel, $0) } }
        let instrumentation = InstrumentationText.all(reports)
        guard !regressions.isEmpty || !missed.isEmpty || !instrumentation.isEmpty else { return nil }
        var headline: [String] = []
        if !regressions.isEmpty { headline.append("\(regressions.count) \(regressions.count == 1 ? "regression" : "regressions")") }
        if !instrumentation.isEmpty {
            headline.append("\(instrumentation.count) instrumentation \(instrumentation.count == 1 ? "finding" : "findings")")
        }
        if !missed.isEmpty { headline.append("\(missed.count) missed \(missed.count == 1 ? "target" : "targets")") }
        var text = "Onramp report \(range.generatedAt): " + headline.joined(separator: ", ")
        // Slack and Mattermost read <…> as links and mentions; versions and names come from apps.
        func plain(_ line: String) -> String {
            line.replacing("&", with: "&amp;").replacing("<", with: "&lt;").replacing(">", with: "&gt;")
        }
        for change in regressions { text += "\n• " + plain(RegressionText.line(change)) }
        for finding in instrumentation { text += "\n• " + plain("instrumentation: " + finding.sentence) }
        for (funnel, target) in missed { text += "\n• " + plain("\(funnel): " + Formatting.target(target)) }
        if !improvements.isEmpty { text += "\n(\(improvements.count) \(improvements.count == 1 ? "improvement" : "improvements") too)" }
        let document: JSON = .object([
            ("text", .string(text)),
            ("generated_at", .string(range.generatedAt)),
            ("regressions", .array(regressions.map(JSONReport.change))),
            ("improvements", .array(improvements.map(JSONReport.change))),
            ("instrumentation", .array(instrumentation.map(InstrumentationText.json))),
            (
                "missed_targets",
                .array(
                    missed.map { funnel, t in
                        .object([("funnel", .string(funnel)), ("name", .string(t.name)), ("threshold", .number(t.threshold)), ("value", .optional(t.value))])
                    })
            ),
        ])
        return document.serialized()
    }
}
