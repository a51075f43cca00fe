import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection
import TestSupport
import Testing

/// The funnel options through the nightly job: nights of late and early
/// events folded in incrementally give the tables a rebuild gives, and the
/// report reads what the engine computes.
@Suite("funnel options in the nightly job against a real PostgreSQL")
struct FunnelOptionsJobTests {
    /// The shipped funnels, each with options: strict (ignoring help), a
    /// window per step, a held property, any order, attribution, and an
    /// exclusion between two steps.
    static let configuration: FunnelConfiguration = {
        var c = bundledConfiguration
        for index in c.funnels.indices {
            switch c.funnels[index].name {
            case "yoked_onboarding":
                c.funnels[index].order = .strict
                c.funnels[index].ignore = [.event("help_opened"), .screen("Settings")]
                c.funnels[index].exclusions = [Exclusion(.event("otp_failed"), between: 1...2)]
            case "ops_employee":
                c.funnels[index].hold = ["properties.flow_version"]
                c.funnels[index].attribution = .lastStep
            case "umuve_onboarding":
                c.funnels[index].order = .any
            case "forma_onboarding":
                for step in 1..<c.funnels[index].steps.count { c.funnels[index].steps[step].within = 20 * 60 }
                c.funnels[index].attribution = .step(2)
            default:
                c.funnels[index].exclusions = [Exclusion(.event("otp_failed"), between: 2...4)]
            }
        }
        return c
    }()

    @Test("three nights, events arriving late and out of order, then a rebuild: identical tables, and the options change the numbers")
    func incrementalEqualsRebuild() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = ProjectionJob(configuration: Self.configuration, showProgress: false)
        let events = EventSeeder.journeys(configuration: bundledConfiguration, personsPerFunnel: 300, seed: 31, detours: true)
        let third = events.count / 3
        let now = Timestamps.microseconds(Date())
        for (night, part) in [events.prefix(third), events.dropFirst(third).prefix(third), events.dropFirst(2 * third)].enumerated() {
            try await pool.withConnection { c in try EventSeeder.insert(c, Array(part)) }
            let summary = try await pool.withConnection { c in try job.run(c, mode: .incremental, now: now + Int64(night)) }
            #expect(summary.newEvents == part.count || night == 0, "night \(night)")
        }
        let incremental = try await pool.withConnection { try TableDump.dump($0) }
        let retention = try await pool.query(TableDump.retentionQuery).rows.count
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: now + 2) }
        let rebuilt = try await pool.withConnection { try TableDump.dump($0) }
        for table in TableDump.queries.keys.sorted() {
            #expect(incremental[table] == rebuilt[table], "\(table) differs after rebuild")
        }
        #expect(try await pool.query(TableDump.retentionQuery).rows.count == retention)

        // The same persons under the plain funnels: the options took some of them out of the chains.
        let report = try await pool.withConnection { c in try ReportQuery().results(c, configuration: Self.configuration, now: now + 2) }
        let plainDB = try await TestDatabase.create()
        let plainPool = plainDB.pool(maxConnections: 1)
        try await plainPool.withConnection { c in try EventSeeder.insert(c, events) }
        _ = try await plainPool.withConnection { c in
            try ProjectionJob(configuration: bundledConfiguration, showProgress: false).run(c, mode: .rebuild, now: now + 2)
        }
        let plain = try await plainPool.withConnection { c in try ReportQuery().results(c, configuration: bundledConfiguration, now: now + 2) }
        func completed(_ results: [ReportQuery.FunnelResult], _ name: String) -> Int {
            results.first { $0.report.funnel == name }?.report.completed ?? -1
        }
        func row(_ results: [ReportQuery.FunnelResult], _ name: String) -> FunnelReport? { results.first { $0.report.funnel == name }?.report }
        #expect(completed(report, "yoked_onboarding") < completed(plain, "yoked_onboarding"), "strict drops the detours")
        #expect(completed(report, "forma_onboarding") < completed(plain, "forma_onboarding"), "a 20-minute window per step")
        #expect(completed(report, "umuve_onboarding") >= completed(plain, "umuve_onboarding"), "any order completes at least as often")
        #expect(row(report, "yoked_onboarding")?.options == ["strict order (ignoring help_opened, Settings)", "excluded: otp_failed between steps 2 and 3"])
        #expect((row(report, "yoked_onboarding")?.excludedPersons ?? 0) > 0)
        #expect(row(report, "umuve_onboarding")?.order == .any)
        await plainPool.close()
        try await plainDB.drop()
        await pool.close()
        try await db.drop()
    }
}
