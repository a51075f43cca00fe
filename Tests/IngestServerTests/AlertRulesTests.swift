import Foundation
import LocalPostgres
import TestSupport
import Testing

/// The alerting rules in the repository (dashboards/prometheus), with
/// Prometheus's own tool: valid, each alert's unit tests passing (firing and
/// not), each with its runbook paragraph, every series they read documented.
@Suite("alert rules, checked and tested with promtool")
struct AlertRulesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let promtool = "/usr/bin/promtool"

    @Test("promtool checks the rules and passes their unit tests; each alert has its runbook; each series it reads is documented")
    func rules() throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.promtool),
            "promtool is missing: scripts/test installs it (apt-get install prometheus) — this test does not skip")
        let rules = Self.root.appendingPathComponent("dashboards/prometheus/onramp-rules.yml")
        let check = try ChildProcess.run([Self.promtool, "check", "rules", rules.path])
        #expect(check.exit.status == 0, "\(check.output)")
        #expect(check.output.contains("SUCCESS: 8 rules found"), "\(check.output)")
        let tested = try ChildProcess.run([Self.promtool, "test", "rules", rules.deletingLastPathComponent().appendingPathComponent("onramp-rules.test.yml").path])
        #expect(tested.exit.status == 0 && tested.output.contains("SUCCESS"), "\(tested.output)")

        let text = try String(contentsOf: rules, encoding: .utf8)
        let alerts = text.split(separator: "\n").compactMap { line -> String? in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            return trimmed.hasPrefix("- alert: ") ? String(trimmed.dropFirst("- alert: ".count)) : nil
        }
        #expect(alerts.count == 7)
        let operations = try String(contentsOf: Self.root.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        for alert in alerts { #expect(operations.contains("- **\(alert)** — "), "\(alert) has no runbook paragraph in docs/operations.md") }
        let tests = try String(contentsOf: rules.deletingLastPathComponent().appendingPathComponent("onramp-rules.test.yml"), encoding: .utf8)
        for alert in alerts { #expect(tests.contains("alertname: \(alert)\n        exp_alerts:\n          - exp_labels"), "\(alert) is tested firing") }

        let documented = try ["docs/ingestion.md", "docs/operations.md"].map {
            try String(contentsOf: Self.root.appendingPathComponent($0), encoding: .utf8)
        }.joined()
        let series = Set(text.matches(of: /onramp_[a-z_]*[a-z]/).map { String($0.output) })
        for name in series.sorted() {
            let documentedName = name.hasPrefix("onramp_job_") ? String(name.dropFirst("onramp_job_".count)) : name.replacingOccurrences(of: "_bucket", with: "")
            #expect(documented.contains(documentedName), "\(name) is read by a rule but documented nowhere")
        }
    }
}
