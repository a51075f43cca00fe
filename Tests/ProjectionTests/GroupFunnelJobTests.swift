import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection
import TestSupport
import Testing

/// Funnels that count groups in the nightly job (docs/funnels.md, "Counting
/// groups"): each group's level against plain SQL (`analytics.window_funnel`
/// over its members' events, as the analysts' views name members and
/// persons), and the incremental runs against a rebuild.
@Suite("the nightly job counting groups, on a real PostgreSQL")
struct GroupFunnelJobTests {
    @Test("a funnel by group, its members joining, signing in and aliased over three nights, equals window_funnel per group and a rebuild, beside the persons' funnels of the same app")
    func groupsIncrementallyAsOnRebuild() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        var configuration = try FunnelConfiguration.default()
        configuration.funnels.append(CompanyLog.funnel)
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        // Companies, and the persons' journeys through ops' own funnels beside them.
        var events = CompanyLog.events(seed: 9)
            + EventSeeder.journeys(configuration: configuration, personsPerFunnel: 40, seed: 5, aliases: true)
        var rng = SplitMix(seed: 11)
        events.shuffle(using: &rng)
        let third = events.count / 3
        for part in [events[..<third], events[third..<2 * third], events[(2 * third)...]] {
            try await pool.withConnection { c in try EventSeeder.insert(c, Array(part)) }
            _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        }
        let incremental = try await pool.withConnection { try TableDump.dump($0) }

        // Each group's stored level is window_funnel's over its members' events.
        let reference = try await pool.withConnection { c in try CompanyLog.referenceLevels(c) }.filter { $0.value >= 1 }
        var stored: [String: Int] = [:]
        for row in try await pool.query(
            "SELECT group_id, level, person_id IS NULL FROM analytics.funnel_persons WHERE funnel = 'companies'"
        ).rows {
            #expect(try row.decode(Bool.self, at: 2), "a group's row names no person")
            stored[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1)
        }
        #expect(reference.count > 25)
        #expect(stored == reference)
        #expect(stored.values.contains(2) && stored.values.contains(1))
        // The persons' funnels hold persons only.
        let strays = try await pool.query(
            "SELECT count(*) FROM analytics.funnel_persons WHERE (funnel = 'companies') <> (group_id IS NOT NULL)").scalar(Int.self)
        #expect(strays == 0)

        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild) }
        let afterRebuild = try await pool.withConnection { try TableDump.dump($0) }
        for table in TableDump.queries.keys.sorted() {
            #expect(afterRebuild[table] == incremental[table], "\(table) differs after rebuild")
        }
        await pool.close()
        try await db.drop()
    }
}
