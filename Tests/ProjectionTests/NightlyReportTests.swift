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

        #expect(try await report.run(databaseURL: db.url) == nil, "no failure asked for")
        #expect(printed.withLockedValue { $0 }.contains("MISSED completion_rate"))
        #expect(said.withLockedValue { $0 }.contains { $0.hasPrefix("rebuild: ") })

        report.mode = .incremental
        report.failOnMissedTargets = true
        #expect(try await report.run(databaseURL: db.url) == .missedTargets)
        #expect(said.withLockedValue { $0 }.contains { $0.hasPrefix("missed targets: yoked_onboarding.completion_rate") })

        // Nothing listens on port 1: the alert is not delivered, and that status wins.
        report.notifyURL = "http://127.0.0.1:1/hook"
        report.notifyAttempts = 1
        #expect(try await report.run(databaseURL: db.url) == .undeliveredNotification)
        try await db.drop()
    }
}
