import Foundation
import Funnels
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// `--metrics-file` (docs/operations.md, "Metrics"): what a batch command
/// leaves for node_exporter's textfile collector, after a success, a
/// finding that fails the run, and a failure.
@Suite("batch commands' metrics files")
struct MetricsFileTests {
    /// Series -> value, each line checked against the text format: a HELP and a TYPE before every series.
    static func read(_ file: URL) throws -> [String: Double] {
        let text = try String(contentsOf: file, encoding: .utf8)
        var values: [String: Double] = [:]
        var described = Set<String>()
        for line in text.split(separator: "\n").map(String.init) {
            if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
                described.insert(line.split(separator: " ")[2].description)
                continue
            }
            let parts = line.split(separator: " ")
            #expect(parts.count == 2, "\(line)")
            let series = String(parts[0])
            let name = String(series.prefix { $0 != "{" })
            #expect(described.contains(name), "\(name) has its HELP and TYPE")
            #expect(series.range(of: #"^onramp_job_[a-z_]+\{command="[a-z_]+"\}$"#, options: .regularExpression) != nil, "\(series)")
            values[series] = Double(parts[1])
        }
        return values
    }

    @Test("report, a run that fails on a finding, a run that cannot reach the database, audiences run: each file says how it ended and what it did, the last success kept")
    func metricsFiles() async throws {
        let db = try await TestDatabase.create()
        let configuration = try FunnelConfiguration.default()
        let events = EventSeeder.journeys(configuration: configuration, personsPerFunnel: 60, seed: 3)
        try await db.pool(maxConnections: 1).withConnection { c in try EventSeeder.insert(c, events) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("onramp-report.prom")
        let report = ["report", "--quiet", "--format", "json", "--metrics-file", file.path]

        let before = Date().timeIntervalSince1970
        let first = try OnrampBinary.run(report + ["--database-url", db.url])
        #expect(first.status == 0, "\(first.stderr)")
        var values = try Self.read(file)
        #expect(values["onramp_job_success{command=\"report\"}"] == 1)
        #expect(values["onramp_job_exit_status{command=\"report\"}"] == 0)
        #expect(values["onramp_job_new_events{command=\"report\"}"] == Double(events.count))
        #expect((values["onramp_job_persons_recomputed{command=\"report\"}"] ?? 0) > 0)
        let succeeded = try #require(values["onramp_job_last_success_timestamp_seconds{command=\"report\"}"])
        #expect(succeeded >= before.rounded(.down) && succeeded == values["onramp_job_last_run_timestamp_seconds{command=\"report\"}"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["onramp-report.prom"], "written whole, then renamed")

        // A finding that fails the run (status 3): what it did is written all the same.
        let missed = try OnrampBinary.run(report + ["--fail-on-missed-targets", "--database-url", db.url])
        #expect(missed.status == 3, "\(missed.stderr)")
        values = try Self.read(file)
        #expect(values["onramp_job_success{command=\"report\"}"] == 0 && values["onramp_job_exit_status{command=\"report\"}"] == 3)
        #expect(values["onramp_job_new_events{command=\"report\"}"] == 0)
        #expect(values["onramp_job_last_success_timestamp_seconds{command=\"report\"}"] == succeeded)

        // No database: the failure is recorded, the last success kept.
        let unreachable = try OnrampBinary.run(report + ["--database-url", "postgresql://onramp@127.0.0.1:1/none?connect_timeout=2"])
        #expect(unreachable.status != 0)
        values = try Self.read(file)
        #expect(values["onramp_job_success{command=\"report\"}"] == 0)
        #expect(values["onramp_job_exit_status{command=\"report\"}"] == Double(unreachable.status))
        #expect(values["onramp_job_last_success_timestamp_seconds{command=\"report\"}"] == succeeded)
        #expect(values["onramp_job_new_events{command=\"report\"}"] == nil)

        // audiences run, in a file of its own.
        let audiences = directory.appendingPathComponent("onramp-audiences.prom")
        let config = directory.appendingPathComponent("onramp.yaml")
        let defaults = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/Funnels/Resources/default-funnels.yaml")
        try (try String(contentsOf: defaults, encoding: .utf8) + "\naudiences:\n  - {name: onboarded, funnel: yoked_onboarding, outcome: completed}\n")
            .write(to: config, atomically: true, encoding: .utf8)
        let kept = try OnrampBinary.run(["audiences", "run", "--config", config.path, "--metrics-file", audiences.path, "--database-url", db.url])
        #expect(kept.status == 0, "\(kept.stderr)")
        values = try Self.read(audiences)
        #expect(values["onramp_job_success{command=\"audiences_run\"}"] == 1)
        #expect(values["onramp_job_skipped{command=\"audiences_run\"}"] == 0)
        #expect((values["onramp_job_audiences_entered{command=\"audiences_run\"}"] ?? 0) > 0, "\(values)")
        try await db.drop()
    }
}
