import Foundation
import Funnels

/// How every output words the instrumentation findings (docs/tracking-health.md):
/// beside the regressions, one line each, and the same fields in JSON.
enum InstrumentationText {
    static func all(_ reports: [FunnelReport]) -> [InstrumentationFinding] { reports.flatMap(\.instrumentation) }

    /// The block text outputs print after the regressions; nothing when there is no finding.
    static func block(_ reports: [FunnelReport], bullet: String, heading: (String) -> String) -> String {
        let findings = all(reports)
        guard !findings.isEmpty else { return "" }
        return heading("Instrumentation (\(findings.count)): likely broken tracking, not users leaving") + "\n"
            + findings.map { bullet + $0.sentence + "\n" }.joined()
    }

    static func json(_ f: InstrumentationFinding) -> JSON {
        .object([
            ("funnel", .string(f.funnel)), ("kind", .string(f.kind.rawValue)), ("step", .string(f.step)),
            ("events", .array(f.labels.map(JSON.string))), ("path", f.path.map(JSON.string) ?? .null),
            ("platform", f.platform.map(JSON.string) ?? .null), ("baseline", .string(f.baseline)), ("recent", .string(f.recent)),
            ("baseline_events", .number(Double(f.baselineEvents))), ("recent_events", .number(Double(f.recentEvents))),
            ("recent_starters", .number(Double(f.recentStarters))), ("baseline_type", f.baselineType.map(JSON.string) ?? .null),
            ("recent_type", f.recentType.map(JSON.string) ?? .null), ("text", .string(f.sentence)),
        ])
    }

    /// The dashboard's part of the banner: a list under its own heading.
    static func html(_ reports: [FunnelReport]) -> String {
        let findings = all(reports)
        guard !findings.isEmpty else { return "" }
        return "<h3 data-instrumentation=\"\(findings.count)\">\(findings.count) instrumentation \(findings.count == 1 ? "finding" : "findings"):"
            + " likely broken tracking, not users leaving</h3><ul>"
            + findings.map {
                "<li data-instrumentation-kind=\"\($0.kind.rawValue)\" data-funnel=\"\(HTML.escape($0.funnel))\" data-step=\"\(HTML.escape($0.step))\">"
                    + HTML.escape($0.sentence) + "</li>"
            }.joined() + "</ul>"
    }
}
