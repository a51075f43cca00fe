import Foundation
import Funnels
import LibPQ
import LocalPostgres
import LogReading
@testable import Projection
import Simulation
import TestSupport
import Testing

/// Funnels that count groups in the nightly job (docs/funnels.md, "Counting
/// groups"): each group's level against plain SQL (`analytics.window_funnel`
/// over its members' events, as the analysts' views name members and
/// persons), and the incremental runs against a rebuild.
@Suite("the nightly job counting groups, on a real PostgreSQL")
struct GroupFunnelJobTests {
    /// Rebuilds at `now` and expects every table as `incremental` holds it, table by table.
    static func expectRebuildGives(
        _ incremental: [String: [String]], _ pool: ConnectionPool, _ job: ProjectionJob,
        now: Int64 = Timestamps.microseconds(Date()), _ context: String = "", sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: now) }
        let rebuilt = try await pool.withConnection { try TableDump.dump($0) }
        for table in TableDump.queries.keys.sorted() {
            #expect(rebuilt[table] == incremental[table], "\(context) \(table) differs after rebuild", sourceLocation: sourceLocation)
        }
    }

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

        try await Self.expectRebuildGives(incremental, pool, job)
        // Cut into many partitions, a member's rows and their groups' copies
        // are placed apart from most persons (`PersonHistoryReader`): the same tables.
        var fine = job
        fine.options.eventsPerPartition = 40
        fine.options.spillBuffer = 256
        try await Self.expectRebuildGives(incremental, pool, fine, "tiny partitions:")
        await pool.close()
        try await db.drop()
    }

    @Test("the simulator's companies: creators name the company they set up, employees one set up in the days before; the shipped funnel by company equals window_funnel per company")
    func simulatedCompanies() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let events = SimulatedHistory.events(count: 12_000, from: 12, seed: 3, apps: ["ops"])
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        let calls = events.filter { $0.type == "group" }
        // A creator's company is named after their device.
        let founding = calls.filter { $0.groupId == "co-\($0.anonymousId ?? "")" }
        let joining = calls.filter { $0.groupId != "co-\($0.anonymousId ?? "")" }
        #expect(founding.count > 40, "creators who entered their company's details set it up")
        #expect(joining.count > founding.count, "employees join the companies")
        // An employee joins a company set up in the three days before, or one from before the history.
        let setUp = Dictionary(founding.map { ($0.groupId ?? "", $0.timestamp) }) { first, _ in first }
        var earlier = 0
        for call in joining {
            guard let company = call.groupId, let at = setUp[company] else {
                #expect(call.groupId?.hasPrefix("co-earlier-") == true, "a company of the history has its creator's call")
                earlier += 1
                continue
            }
            #expect(at < call.timestamp && call.timestamp - at <= 3 * 86_400_000_000, "\(company)")
        }
        #expect(earlier < joining.count / 4, "most join a company of the history")
        #expect(Set(joining.compactMap(\.groupId)).intersection(setUp.keys).count > founding.count / 2, "most companies get employees")

        let configuration = try FunnelConfiguration.default()
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        let funnel = try #require(configuration.funnel(named: "ops_companies"))
        var stored: [String: Int] = [:]
        for row in try await pool.query("SELECT group_id, level FROM analytics.funnel_persons WHERE funnel = 'ops_companies'").rows {
            stored[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1)
        }
        let reference = try await pool.withConnection { c in try CompanyLog.referenceLevels(c, funnel: funnel) }
        #expect(stored == reference.filter { $0.value >= 1 })
        let completed = stored.values.filter { $0 == 4 }.count
        #expect(completed > stored.count / 3 && completed < stored.count, "\(completed) of \(stored.count) companies completed")
        await pool.close()
        try await db.drop()
    }

    @Test("a simulated ops history with everyday use, night after night: the companies' activity goes to their stored rows, or recomputes them, and every table equals a rebuild")
    func companiesNightByNight() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let now = Date()
        let events = SimulatedHistory.events(count: 16_000, from: 14, to: 0.05, seed: 8, apps: ["ops"], laterUse: LaterUse(), now: now)
            .sorted { $0.timestamp < $1.timestamp }
        #expect(events.contains { $0.type == "group" })
        let job = ProjectionJob(configuration: try FunnelConfiguration.default(), showProgress: false)
        // Each night what happened before it, the clock at its time.
        let end = Timestamps.microseconds(now)
        var written = 0
        var summaries: [ProjectionJob.Summary] = []
        for nightsAgo in [6, 4, 3, 2, 1, 0] {
            let clock = end - Int64(nightsAgo) * 86_400_000_000
            let night = Array(events[written...].prefix { $0.timestamp < clock })
            written += night.count
            try await pool.withConnection { c in try EventSeeder.insert(c, night) }
            summaries.append(try await pool.withConnection { c in try job.run(c, mode: .incremental, now: clock) })
        }
        #expect(written == events.count)
        let incremental = try await pool.withConnection { try TableDump.dump($0) }
        #expect(try await pool.query("SELECT count(*) FROM funnel_person_retention WHERE starts_with(person_id, chr(31))").scalar(Int.self) > 10)
        try await Self.expectRebuildGives(incremental, pool, job, now: end)
        await pool.close()
        try await db.drop()
    }

    @Test("a group call repeated at each sign-in is everyday use: it recomputes nobody; a person's first call naming a group recomputes that group; each night equals a rebuild")
    func repeatedGroupCalls() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        var configuration = try FunnelConfiguration.default()
        configuration.funnels = [CompanyLog.funnel]
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        let day: Int64 = 86_400_000_000
        let start = (Timestamps.microseconds(Date()) / day - 6) * day
        func screen(_ name: String, _ anonymous: String?, _ user: String?, _ t: Int64) -> SeedEvent {
            SeedEvent(app: "ops", type: "screen", event: name, anonymousId: anonymous, userId: user, timestamp: t)
        }
        func group(_ id: String, _ user: String, _ t: Int64) -> SeedEvent {
            SeedEvent(app: "ops", type: "group", userId: user, timestamp: t, groupId: id)
        }
        let nights: [[SeedEvent]] = [
            [screen("companySetup", "d-ann", nil, start), SeedEvent(app: "ops", type: "identify", anonymousId: "d-ann", userId: "ann", timestamp: start + 60_000_000),
             group("acme", "ann", start + 120_000_000), group("acme", "bob", start + 3_600_000_000), screen("welcome", nil, "bob", start + 3_700_000_000)],
            [group("acme", "bob", start + 2 * day), group("acme", "ann", start + 2 * day + 1_000_000)],
            [group("beta", "bob", start + 3 * day)],
        ]
        var recomputed: [(persons: Int, groups: Int)] = []
        for (n, night) in nights.enumerated() {
            try await pool.withConnection { c in try EventSeeder.insert(c, night) }
            let clock = start + Int64(n + 4) * day
            let summary = try await pool.withConnection { c in try job.run(c, mode: .incremental, now: clock) }
            recomputed.append((summary.personsRecomputed, summary.groupsRecomputed))
            let incremental = try await pool.withConnection { try TableDump.dump($0) }
            try await Self.expectRebuildGives(incremental, pool, job, now: clock, "night \(n + 1)")
        }
        #expect(recomputed[1].persons == 0 && recomputed[1].groups == 0, "repeated calls are everyday use: \(recomputed[1])")
        #expect(recomputed[2].persons == 0 && recomputed[2].groups == 1, "bob's first call naming beta recomputes beta: \(recomputed[2])")
        #expect(try await pool.query("SELECT group_id || ':' || level FROM analytics.funnel_persons ORDER BY 1").rows.map {
            try $0.decode(String.self, at: 0)
        } == ["acme:2"])  // bob set nothing up: beta has no first step
        await pool.close()
        try await db.drop()
    }
}
