import Foundation
import Funnels
import LibPQ
import LocalPostgres
import NIOConcurrencyHelpers
@testable import onramp
import Projection
import Reports
import TestSupport
import Testing

/// The workflow `onramp report` and `onramp rebuild` run once their options
/// are read, called as the commands call it.
@Suite struct NightlyReportTests {
    @Test("the report goes to its output; missed targets and an undeliverable alert give their exit statuses")
    func findingsDecideTheExitStatus() async throws {
        let configuration = bundledConfiguration
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        try await pool.withConnection { c in
            try EventSeeder.insert(c, EventSeeder.journeys(configuration: configuration, personsPerFunnel: 200, seed: 7))
        }
        await pool.close()
        let printed = NIOLockedValueBox("")
        let said = NIOLockedValueBox([String]())
        var report = NightlyReport(
            mode: .rebuild, configuration: configuration, query: ReportQuery(), writer: ReportWriter(format: .table), showProgress: false)
        report.output = { text in printed.withLockedValue { $0 += text } }
        report.info = { line in said.withLockedValue { $0.append(line) } }

        #expect(try await report.run(databaseURL: db.url).status == nil, "no failure asked for")
        #expect(printed.withLockedValue { $0 }.contains("MISSED completion_rate"))
        #expect(said.withLockedValue { $0 }.contains { $0.hasPrefix("rebuild: ") })

        report.mode = .incremental
        report.failOnMissedTargets = true
        #expect(try await report.run(databaseURL: db.url).status == .missedTargets)
        #expect(said.withLockedValue { $0 }.contains { $0.hasPrefix("missed targets: yoked_onboarding.completion_rate") })

        // Nothing listens on port 1: the alert is not delivered, and that status wins.
        report.notifyURL = "http://127.0.0.1:1/hook"
        report.notifyAttempts = 1
        #expect(try await report.run(databaseURL: db.url).status == .undeliveredNotification)
        try await db.drop()
    }

    @Test("the night delivers its audiences' changes, signed, once it has committed; without a secret it stops before anything is written")
    func nightDeliversAudiences() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("night-deliveries-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let log = scratch.appendingPathComponent("received.jsonl"), secret = scratch.appendingPathComponent("secret")
        let receiver = try AudienceReceiver(port: 0, log: log)
        defer { receiver.stop() }
        func configuration(secretFile: String) throws -> FunnelConfiguration {
            try FunnelConfiguration.parse(yaml: AudienceReference.signupConfiguration + """
                  - name: stalled
                    funnel: signup
                    stalled: {step: 2, for: 1h}
                    deliver: {url: "http://127.0.0.1:\(receiver.port)/hook", secret_file: \(secretFile)}

                """, source: "night.yaml")
        }
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        var rng = SplitMix(seed: 73)
        let now = Timestamps.microseconds(Date())
        let (events, late) = AudienceReference.signupRound(&rng, round: 0, clock: now - 3_600_000_000, hours: 8)
        try await pool.withConnection { c in try EventSeeder.insert(c, events + late) }
        let said = NIOLockedValueBox([String]())
        var report = NightlyReport(
            mode: .incremental, configuration: try configuration(secretFile: secret.path), query: ReportQuery(),
            writer: ReportWriter(format: .table), showProgress: false)
        report.output = { _ in }
        report.info = { line in said.withLockedValue { $0.append(line) } }

        // No secret: refused naming the audience, and the job never ran.
        await #expect(throws: (any Error).self) { try await report.run(databaseURL: db.url, now: now) }
        #expect(try await pool.query("SELECT count(*) FROM audience_definitions").scalar(Int.self) == 0)

        try AudienceReceiver.secret.write(to: secret, atomically: true, encoding: .utf8)
        #expect(try await report.run(databaseURL: db.url, now: now).status == nil)
        let members = try await pool.query("SELECT person_id FROM audience_members").rows.map { try $0.decode(String.self, at: 0) }
        #expect(!members.isEmpty)
        let batches = try AudienceReceiver.received(log)
        #expect(batches.allSatisfy { $0.valid })
        #expect(Set(batches.flatMap(\.changes).compactMap { $0["person_id"] as? String }) == Set(members))
        #expect(said.withLockedValue { $0 }.contains { $0.hasPrefix("audiences: \(members.count) entered, 0 left; delivered: \(members.count),") },
                "\(said.withLockedValue { $0 })")
        await pool.close()
        try await db.drop()
    }
}
