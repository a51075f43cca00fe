import Explore
import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection
import TestSupport
import Testing

/// Funnels that count groups, asked at query time, against plain SQL:
/// `analytics.window_funnel` over each group's members' events, members and
/// persons as the analysts' views name them; and against the nightly job.
@Suite("funnels counting groups, on a real PostgreSQL")
struct GroupFunnelTests {
    @Test("a funnel by group equals window_funnel over each group's members' events, and the nightly job's report of it")
    func groupsAgainstSQL() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("group-funnel-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let events = CompanyLog.events(seed: 4)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        // The nightly job links the persons the analysts' views name, and counts the groups too.
        var funnel = CompanyLog.funnel
        var configured = try FunnelConfiguration.default()
        configured.funnels.append(funnel)
        let configuration = configured
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        let now = Timestamps.microseconds(Date())
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: now) }

        var byGroup = FunnelQuery(funnel: funnel, timeZone: "UTC", now: now)
        byGroup.diagnostics = true
        byGroup.retention = true
        let asked = byGroup
        let answer = try await pool.withConnection { c in try Explorer(cacheRoot: cache).answer(asked, on: c) }
        let levels = Array(try await pool.withConnection { c in try CompanyLog.referenceLevels(c) }.values)
        #expect(levels.count > 30)
        #expect(answer.report.started == levels.filter { $0 >= 1 }.count)
        #expect(answer.report.steps[1].persons == levels.filter { $0 >= 2 }.count)
        #expect(answer.report.completed > 0 && answer.report.completed < answer.report.started)
        #expect(answer.report.options.first?.hasPrefix("counting groups") == true)
        #expect(answer.report.aggregateBy == .group)

        // The nightly job's report, diagnostics and retention included, is the explorer's.
        let nightly = try await pool.withConnection { c in
            try ReportQuery(funnels: ["companies"]).results(c, configuration: configuration, now: now)
        }
        #expect(nightly.first?.report == answer.report)
        #expect(nightly.first?.secondsToComplete.sorted() == answer.secondsToComplete.sorted())

        // By persons, the same steps: a creator and an employee are two persons.
        funnel.aggregateBy = .person
        let personQuery = FunnelQuery(funnel: funnel, timeZone: "UTC", now: now)
        let byPersons = try await pool.withConnection { c in try Explorer(cacheRoot: cache).answer(personQuery, on: c) }
        #expect(byPersons.report.completed == 1)  // the loner alone did both

        await pool.close()
        try await db.drop()
    }
}
