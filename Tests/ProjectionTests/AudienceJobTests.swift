import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection
import TestSupport
import Testing

/// Audiences kept by the job and by `onramp audiences run` (docs/audiences.md):
/// after every run the members equal a rebuild's at the same clock, and an
/// independent computation from the events (persons joined by the identity
/// rule, each evaluated at the clock by `AudienceReference`).
@Suite("audiences kept by the job against a real PostgreSQL", .serialized)
struct AudienceJobTests {
    static let yaml = AudienceReference.signupConfiguration + """
          - {name: stalled, funnel: signup, stalled: {step: 2, for: 1h}}
          - {name: completed, funnel: signup, outcome: completed}
          - {name: dropped_lately, funnel: signup, outcome: dropped, step: 1, days: 2}
          - {name: helped_lately, app: yoked, did: {event: help_opened, within: 6h}}
          - name: stalled_unhelped
            all_of:
              - audience: stalled
              - not: {did: {event: help_opened, within: 2h}}
        """

    static let hour: Int64 = 3_600_000_000

    typealias Member = String

    /// `audience|person` of every member, as the table holds them.
    static func members(_ c: Connection) throws -> Set<Member> {
        Set(try c.query("SELECT audience || '|' || person_id FROM audience_members").rows.map { try $0.decode(String.self, at: 0) })
    }

    /// The members at `now` from the events alone.
    static func reference(_ events: [SeedEvent], configuration: FunnelConfiguration, now: Int64) -> Set<Member> {
        AudienceReference.members(events, configuration: configuration, now: now)
    }

    static func round(_ rng: inout SplitMix, round: Int, clock: Int64, hours: Int64, groups: Bool = false) -> (now: [SeedEvent], late: [SeedEvent]) {
        AudienceReference.signupRound(&rng, round: round, clock: clock, hours: hours, groups: groups)
    }

    /// `yaml` with the signup funnel counted by companies too, and two audiences of companies.
    static let withGroupsYAML = yaml.replacingOccurrences(of: "audiences:\n", with: """
          - name: signup_companies
            app: yoked
            aggregate_by: group
            window: 24h
            steps:
              - event: started
              - event: phone_entered
              - event: otp_verified
        audiences:
          - {name: companies_stalled, funnel: signup_companies, stalled: {step: 2, for: 1h}}
          - {name: companies_helped, app: yoked, aggregate_by: group, did: {event: help_opened, within: 6h}}

        """)

    @Test("after every run, incremental or quiet, with late events, aliases, erasures and groups, the members equal a rebuild's and the events' own at the same clock")
    func membersEqualRebuildAndReference() async throws {
        let configuration = try FunnelConfiguration.parse(yaml: Self.withGroupsYAML, source: "audiences.yaml")
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        let kept = try await TestDatabase.create(), rebuilt = try await TestDatabase.create()
        let keptPool = kept.pool(maxConnections: 1), rebuiltPool = rebuilt.pool(maxConnections: 1)
        var rng = SplitMix(seed: 69)
        let start = (Timestamps.microseconds(Date()) / Self.hour - 5 * 24) * Self.hour
        var inserted: [SeedEvent] = []
        var pendingLate: [SeedEvent] = []
        var clock = start
        var quietRuns = 0, changes = 0, erased = 0
        for n in 0..<9 {
            // Every third run nothing new arrives: only the clock moves.
            let quiet = n % 3 == 2
            clock += quiet ? Self.hour / 2 + Int64(n) * Self.hour : 7 * Self.hour
            var batch: [SeedEvent] = []
            if !quiet {
                let (events, late) = Self.round(&rng, round: n, clock: clock, hours: 7, groups: true)
                batch = events + pendingLate
                pendingLate = late
            }
            inserted += batch
            let arriving = batch
            for pool in [keptPool, rebuiltPool] { try await pool.withConnection { c in try EventSeeder.insert(c, arriving) } }
            // Now and then a returning user is erased (their events, and their devices' own, leave the log).
            if !quiet, n > 0, n % 2 == 0 {
                let user = "user-\(rng.next() % 60)"
                for pool in [keptPool, rebuiltPool] {
                    _ = try await pool.query(
                        "SELECT request_id FROM onramp_privacy_erase('yoked', ARRAY[$1], ARRAY[]::text[], 'test', false)", [.text(user)])
                }
                let left = Set(try await keptPool.query("SELECT message_id FROM events").rows.map { try $0.decode(String.self, at: 0) })
                erased += inserted.count { !left.contains($0.messageId) }
                inserted = inserted.filter { left.contains($0.messageId) }
            }
            let now = clock
            let summary = try await keptPool.withConnection { c in try job.runAudiences(c, now: now) }
            if quiet {
                #expect(summary.job == nil, "run \(n): nothing new, the job does not run")
                quietRuns += 1
            }
            changes += summary.entered + summary.left
            _ = try await rebuiltPool.withConnection { c in try job.run(c, mode: .rebuild, now: now) }
            let members = try await keptPool.withConnection { try Self.members($0) }
            #expect(members == (try await rebuiltPool.withConnection { try Self.members($0) }), "run \(n): kept vs rebuilt")
            #expect(members == Self.reference(inserted, configuration: configuration, now: now), "run \(n): kept vs the events")
            // What changed is what the changes say: members are the enters less the leaves.
            let net = try await keptPool.query(
                """
                SELECT count(*) FILTER (WHERE change = 'enter') - count(*) FILTER (WHERE change = 'leave') FROM audience_changes
                """).scalar(Int.self)
            #expect(net == members.count, "run \(n)")
        }
        #expect(quietRuns == 3)
        #expect(changes > 50)
        #expect(erased > 0, "some erasure took events")
        // Every audience had members at some point, the combined one included.
        let seen = try await keptPool.query("SELECT count(DISTINCT audience) FROM audience_changes").scalar(Int.self)
        #expect(seen == configuration.audiences.count)
        for pool in [keptPool, rebuiltPool] { await pool.close() }
        try await kept.drop()
        try await rebuilt.drop()
    }

    @Test("an edited audience is recomputed from the whole log with its app's funnels, a removed one leaves no rows")
    func editedAudienceIsRecomputed() async throws {
        let configuration = try FunnelConfiguration.parse(yaml: Self.yaml, source: "audiences.yaml")
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        var rng = SplitMix(seed: 70)
        let clock = (Timestamps.microseconds(Date()) / Self.hour - 24) * Self.hour
        let (events, late) = Self.round(&rng, round: 0, clock: clock, hours: 20)
        try await pool.withConnection { c in try EventSeeder.insert(c, events + late) }
        let first = ProjectionJob(configuration: configuration, showProgress: false)
        _ = try await pool.withConnection { c in try first.run(c, mode: .incremental, now: clock) }

        var edited = configuration
        edited.audiences = configuration.audiences.filter { $0.name != "helped_lately" }
        if let index = edited.audiences.firstIndex(where: { $0.name == "stalled" }), let funnel = edited.funnel(named: "signup") {
            edited.audiences[index].condition = .funnel(FunnelStanding(funnel: funnel, outcome: .stalled(seconds: 1800), step: 2))
        }
        var job = ProjectionJob(configuration: edited, showProgress: false)
        let said = Said()
        job.announce = { said.append($0) }
        let announcing = job
        let summary = try await pool.withConnection { c in try announcing.run(c, mode: .incremental, now: clock + Self.hour) }
        let lines = said.lines
        #expect(summary.definitions.recompute.map(\.funnel) == ["signup"])
        #expect(lines.contains { $0.hasPrefix("signup: audience 'stalled' changed: will be recomputed from the whole log") }, "\(lines)")
        let members = try await pool.withConnection { try Self.members($0) }
        #expect(members == Self.reference(events + late, configuration: edited, now: clock + Self.hour))
        #expect(try await pool.query("SELECT count(*) FROM audience_changes WHERE audience = 'helped_lately'").scalar(Int.self) == 0)
        #expect(try await pool.query("SELECT count(*) FROM audience_definitions").scalar(Int.self) == edited.audiences.count)
        await pool.close()
        try await db.drop()
    }

    /// `withGroupsYAML` with a second funnel broken down by two audiences:
    /// one over the first funnel (`stalled`, which a `for` passing moves
    /// people into), one over behaviour in the last hours (`helped_lately`,
    /// which the clock moves people out of); and its companies' twin.
    static let brokenDownYAML = withGroupsYAML.replacingOccurrences(of: "audiences:\n", with: AudienceReference.verifiedFunnel + """
          - name: companies_verified
            app: yoked
            aggregate_by: group
            window: 12h
            breakdowns: [audience:companies_stalled, audience:companies_helped]
            steps:
              - event: phone_entered
              - event: otp_verified
        audiences:

        """)

    /// Each table a breakdown reaches, as an md5 of its rows (the run's clock left out).
    static func funnelRows(_ c: Connection) throws -> [String: String] {
        var digests: [String: String] = [:]
        for table in ["funnel_persons", "funnel_tallies", "funnel_daily", "funnel_cohorts", "funnel_driver_counts"] {
            digests[table] = try c.query(
                """
                SELECT coalesce(md5(string_agg(j, E'\n' ORDER BY j)), '') FROM (
                    SELECT (to_jsonb(t) - ARRAY['computed_at', 'updated_at', 'built_at', 'checked_at'])::text AS j FROM \(table) t) s
                """).scalar(String.self)
        }
        return digests
    }

    @Test("a funnel broken down by audiences: each unit's value is its membership at the run's clock, after every incremental run as after a rebuild",
          arguments: [false, true])
    func breakdownByAudienceEqualsRebuild(companiesOnly: Bool) async throws {
        // Companies only: no person's own breakdown brings their companies along, the groups' spans alone do.
        let yaml = companiesOnly
            ? Self.brokenDownYAML.replacingOccurrences(of: "breakdowns: [audience:stalled, audience:helped_lately]", with: "breakdowns: []")
            : Self.brokenDownYAML
        let configuration = try FunnelConfiguration.parse(yaml: yaml, source: "audiences.yaml")
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        let kept = try await TestDatabase.create(), rebuilt = try await TestDatabase.create()
        let keptPool = kept.pool(maxConnections: 1), rebuiltPool = rebuilt.pool(maxConnections: 1)
        var rng = SplitMix(seed: 71)
        var clock = (Timestamps.microseconds(Date()) / Self.hour - 4 * 24) * Self.hour
        var inserted: [SeedEvent] = []
        var pendingLate: [SeedEvent] = []
        var valuesSeen = Set<String>()
        for n in 0..<8 {
            // Every third run nothing new arrives: `onramp audiences run` keeps the members, not the funnels.
            let quiet = n % 3 == 2
            clock += quiet ? 90 * 60_000_000 : 5 * Self.hour
            var batch: [SeedEvent] = []
            if !quiet {
                let (events, late) = Self.round(&rng, round: n, clock: clock, hours: 5, groups: true)
                batch = events + pendingLate
                pendingLate = late
            }
            inserted += batch
            let arriving = batch, now = clock
            for pool in [keptPool, rebuiltPool] { try await pool.withConnection { c in try EventSeeder.insert(c, arriving) } }
            let summary = try await keptPool.withConnection { c in try job.runAudiences(c, now: now) }
            guard summary.job != nil else { continue }
            _ = try await rebuiltPool.withConnection { c in try job.run(c, mode: .rebuild, now: now) }
            let rows = try await keptPool.withConnection { try Self.funnelRows($0) }
            #expect(rows == (try await rebuiltPool.withConnection { try Self.funnelRows($0) }), "run \(n): kept vs rebuilt")
            guard !companiesOnly else { continue }
            // Each person's values against the events' own membership at the clock.
            let members = Self.reference(inserted, configuration: configuration, now: now)
            for row in try await keptPool.query(
                """
                SELECT person_id, breakdown->>'audience:stalled', breakdown->>'audience:helped_lately'
                FROM funnel_persons WHERE funnel = 'verified'
                """
            ).rows {
                let person = try row.decode(String.self, at: 0)
                for (column, audience) in [(1, "stalled"), (2, "helped_lately")] {
                    let value = try row.decode(String.self, at: column)
                    valuesSeen.insert("\(audience)=\(value)")
                    #expect(value == (members.contains("\(audience)|\(person)") ? "in" : "not in"), "run \(n): \(person) in \(audience)")
                }
            }
        }
        #expect(companiesOnly || valuesSeen == ["stalled=in", "stalled=not in", "helped_lately=in", "helped_lately=not in"])
        // The companies' rows were broken down too, both ways.
        let companies = try await keptPool.query(
            "SELECT count(DISTINCT breakdown->>'audience:companies_stalled') FROM funnel_persons WHERE funnel = 'companies_verified'"
        ).scalar(Int.self)
        #expect(companies == 2)
        for pool in [keptPool, rebuiltPool] { await pool.close() }
        try await kept.drop()
        try await rebuilt.drop()
    }

    @Test("an erasure takes the erased out of the audiences at once, and leaves the user who shared their device a member, entered once")
    func erasureKeepsTheOthers() async throws {
        let configuration = try FunnelConfiguration.parse(yaml: Self.yaml, source: "audiences.yaml")
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let clock = (Timestamps.microseconds(Date()) / Self.hour - 24) * Self.hour
        // Ben signs in on his tablet, Ana later on the same tablet; both stop at the phone step.
        var events: [SeedEvent] = []
        for (n, user) in ["ben", "ana"].enumerated() {
            let t = clock - Int64(6 - n) * Self.hour
            events.append(SeedEvent(app: "yoked", messageId: "\(user)-0", event: "started", anonymousId: "tablet", userId: user, timestamp: t))
            events.append(SeedEvent(
                app: "yoked", messageId: "\(user)-1", event: "phone_entered", anonymousId: "tablet", userId: user, timestamp: t + 60_000_000))
        }
        let seeded = events
        try await pool.withConnection { c in try EventSeeder.insert(c, seeded) }
        _ = try await pool.withConnection { c in try job.runAudiences(c, now: clock) }
        let stalled = "SELECT person_id FROM audience_members WHERE audience = 'stalled' ORDER BY 1"
        #expect(try await pool.query(stalled).rows.map { try $0.decode(String.self, at: 0) } == ["ana", "ben"])

        _ = try await pool.query("SELECT request_id FROM onramp_privacy_erase('yoked', ARRAY['ana'], ARRAY[]::text[], 'test', false)")
        let pending = Set(try await pool.query("SELECT person_id FROM privacy_pending").rows.map { try $0.decode(String.self, at: 0) })
        #expect(pending.isSuperset(of: ["ana", "ben"]), "Ben's tablet is linked again, so he is recomputed: \(pending)")
        // At once: Ana is gone from every audience table, Ben is still a member.
        #expect(try await pool.query(stalled).rows.map { try $0.decode(String.self, at: 0) } == ["ben"])
        #expect(try await pool.query("SELECT count(*) FROM audience_changes WHERE person_id = 'ana'").scalar(Int.self) == 0)
        _ = try await pool.withConnection { c in try job.runAudiences(c, now: clock + Self.hour) }
        #expect(try await pool.query(stalled).rows.map { try $0.decode(String.self, at: 0) } == ["ben"])
        let bens = try await pool.query(
            "SELECT change FROM audience_changes WHERE audience = 'stalled' AND person_id = 'ben' ORDER BY id"
        ).rows.map { try $0.decode(String.self, at: 0) }
        #expect(bens == ["enter"], "Ben entered once and stayed")
        await pool.close()
        try await db.drop()
    }
}
