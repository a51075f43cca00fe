import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection
import TestSupport
import Testing

@Suite("the nightly job against a real PostgreSQL")
struct ProjectionJobTests {
    static let configuration = bundledConfiguration

    func job() -> ProjectionJob { ProjectionJob(configuration: Self.configuration, showProgress: false) }

    @Test("report, then rebuild, give identical tables; a second report with nothing new changes nothing")
    func reportThenRebuildIdentical() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = self.job()
        let events = EventSeeder.journeys(configuration: Self.configuration, personsPerFunnel: 300, seed: 7)
        // Arrives in three nights, to exercise the incremental path.
        for (n, part) in [events.prefix(events.count / 3), events.dropFirst(events.count / 3).prefix(events.count / 3),
                          events.dropFirst(2 * (events.count / 3))].enumerated() {
            try await pool.withConnection { c in try EventSeeder.insert(c, Array(part)) }
            let summary = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
            #expect(summary.newEvents == part.count, "night \(n)")
        }
        let incremental = try await pool.withConnection { try TableDump.dump($0) }
        #expect((incremental["funnel_persons"]?.count ?? 0) > 1000)
        #expect((incremental["funnel_daily"]?.count ?? 0) > 100)
        #expect((incremental["identity_links"]?.count ?? 0) > 100)

        let idle = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        #expect(idle.newEvents == 0)
        #expect(idle.personsRecomputed == 0)
        #expect(try await pool.withConnection { try TableDump.dump($0) } == incremental)

        // The stored links are exactly what the engine's identity rule gives for the whole log.
        let observations = events.filter { $0.anonymousId != nil && $0.userId != nil }.map {
            IdentityObservation(anonymousId: $0.anonymousId, userId: $0.userId, timestamp: $0.timestamp)
        }
        var expectedLinks: [String: IdentityLink] = [:]
        for (app, group) in Dictionary(grouping: zip(events.filter { $0.anonymousId != nil && $0.userId != nil }, observations), by: { $0.0.app }) {
            for (anonymousId, link) in IdentityResolver.links(from: group.map(\.1)) { expectedLinks["\(app)|\(anonymousId)"] = link }
        }
        let storedLinks = try await pool.query(
            "SELECT app || '|' || anonymous_id, user_id, (extract(epoch FROM first_seen) * 1000000)::int8 FROM identity_links")
        #expect(storedLinks.rows.count == expectedLinks.count)
        for row in storedLinks.rows {
            let link = expectedLinks[try row.decode(String.self, at: 0)]
            #expect(link?.userId == (try row.decode(String.self, at: 1)))
            #expect(link?.firstSeen == (try row.decode(Int64.self, at: 2)))
        }

        let indexes = """
            SELECT string_agg(indexdef, '; ' ORDER BY indexname) FROM pg_indexes WHERE tablename IN ('funnel_persons', 'identity_links')
            """
        let indexesBefore = try await pool.query(indexes).scalar(String.self)
        let rebuilt = try await pool.withConnection { c in try job.run(c, mode: .rebuild) }
        #expect(rebuilt.newEvents == events.count)
        // The rebuild drops the keys and indexes while it refills the tables, and puts them back.
        #expect(try await pool.query(indexes).scalar(String.self) == indexesBefore)
        #expect(["funnel_persons_pkey", "funnel_persons_open", "identity_links_pkey", "identity_links_user"].allSatisfy(indexesBefore.contains))
        let afterRebuild = try await pool.withConnection { try TableDump.dump($0) }
        for table in TableDump.queries.keys.sorted() {
            #expect(afterRebuild[table] == incremental[table], "\(table) differs after rebuild")
        }
        await pool.close()
        try await db.drop()
    }

    @Test("a late event for an old cohort rewrites exactly that cohort's rows")
    func lateEventRewritesOneCohort() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = self.job()
        let day: Int64 = 86_400_000_000
        let start = (Timestamps.microseconds(Date()) / day - 10) * day + 3_600_000_000  // 10 days ago, 01:00 UTC
        // umuve: one person a day for five days, each stopping after the any_of step.
        var events: [SeedEvent] = []
        for d in 0..<5 {
            let t = start + Int64(d) * day
            events.append(SeedEvent(app: "umuve", event: "onboarding_screen_viewed", anonymousId: "dev-\(d)", timestamp: t, properties: #"{"page": 1}"#))
            events.append(SeedEvent(app: "umuve", event: "onboarding_skipped", anonymousId: "dev-\(d)", timestamp: t + 10_000_000))
        }
        let seeded = events
        try await pool.withConnection { c in try EventSeeder.insert(c, seeded) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        let before = try await pool.withConnection { try TableDump.dump($0) }
        let cohortRows = { (dump: [String: [String]]) in (dump["funnel_cohorts"] ?? []) + (dump["funnel_daily"] ?? []) }

        // Days later, the offline device of day 2 delivers the rest of its onboarding.
        let late = start + 2 * day
        try await pool.withConnection { c in
            try EventSeeder.insert(c, [
                SeedEvent(app: "umuve", event: "apple_sign_in_completed", anonymousId: "dev-2", userId: "user-2", timestamp: late + 60_000_000),
                SeedEvent(app: "umuve", event: "main_screen_viewed", anonymousId: "dev-2", userId: "user-2", timestamp: late + 90_000_000),
            ])
        }
        let summary = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        #expect(summary.newEvents == 2)
        #expect(summary.personsRecomputed == 1)
        let after = try await pool.withConnection { try TableDump.dump($0) }
        let lateDay = Timestamps.format(microseconds: late).prefix(10)
        let changedBefore = Set(cohortRows(before)).subtracting(cohortRows(after))
        let changedAfter = Set(cohortRows(after)).subtracting(cohortRows(before))
        #expect(!changedAfter.isEmpty)
        #expect(changedBefore.allSatisfy { $0.contains(lateDay) }, "\(changedBefore)")
        #expect(changedAfter.allSatisfy { $0.contains(lateDay) }, "\(changedAfter)")
        let completed = try await pool.query(
            "SELECT p.completed, p.person_id FROM funnel_persons p WHERE p.funnel = 'umuve_onboarding' AND p.cohort_day = $1::date",
            [.text(String(lateDay))])
        #expect(try completed.rows.map { try $0.decode(Bool.self, at: 0) } == [true])
        #expect(try completed.rows.map { try $0.decode(String.self, at: 1) } == ["user-2"])  // anonymous and identified halves are one person
        #expect(try await pool.query("SELECT count(*) FROM funnel_persons WHERE person_id = 'dev-2'").scalar(Int.self) == 0)
        await pool.close()
        try await db.drop()
    }

    static let hour: Int64 = 3_600_000_000
    /// Three days ago, 01:00 UTC: windows of a day open and close at runs set after it.
    static var threeDaysAgo: Int64 { (Timestamps.microseconds(Date()) / (24 * hour) - 3) * 24 * hour + hour }

    /// One of umuve's onboarding events from `device`.
    static func umuve(_ event: String, _ device: String, _ at: Int64, _ properties: String) -> SeedEvent {
        SeedEvent(app: "umuve", event: event, anonymousId: device, timestamp: at, properties: properties)
    }

    @Test("a window that closes with no new events is closed in place, without recomputing the person, as a rebuild would")
    func closedWindowsAreClosedInPlace() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = self.job()
        let hour = Self.hour, t = Self.threeDaysAgo, umuve = Self.umuve
        let night1 = [
            umuve("onboarding_screen_viewed", "dev-a", t, #"{"page": 1}"#),
            umuve("onboarding_screen_viewed", "dev-b", t, #"{"page": 1}"#),
            umuve("onboarding_skipped", "dev-b", t + 10_000_000, "{}"),
        ]
        try await pool.withConnection { c in try EventSeeder.insert(c, night1) }
        let first = try await pool.withConnection { c in try job.run(c, mode: .incremental, now: t + hour) }
        #expect(first.personsRecomputed == 2)
        let open = try await pool.query(
            "SELECT count(*) FROM funnel_persons WHERE in_progress AND open_until = $1", [.microseconds(t + 24 * hour)])
        #expect(try open.scalar(Int.self) == 2)

        // A day later dev-a went on, within its window; dev-b did nothing more.
        let night2 = [umuve("onboarding_skipped", "dev-a", t + 2 * hour, "{}")]
        try await pool.withConnection { c in try EventSeeder.insert(c, night2) }
        let second = try await pool.withConnection { c in try job.run(c, mode: .incremental, now: t + 25 * hour) }
        #expect(second.personsRecomputed == 1)  // dev-a, for its new event
        #expect(second.windowsClosed == 1)  // dev-b, without reading its events
        #expect(try await pool.query("SELECT count(*) FROM funnel_persons WHERE in_progress OR open_until IS NOT NULL").scalar(Int.self) == 0)

        let incremental = try await pool.withConnection { try TableDump.dump($0) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: t + 25 * hour) }
        #expect(try await pool.withConnection { try TableDump.dump($0) } == incremental)
        await pool.close()
        try await db.drop()
    }

    @Test("a completer counts in the drop-off diagnostics and retention once their window has closed, closed in place, as a rebuild would")
    func completersCountOnceTheirWindowCloses() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = self.job()
        let hour = Self.hour, t = Self.threeDaysAgo, umuve = Self.umuve
        // dev-a completes within minutes; dev-b, a day earlier, stopped after step 1.
        let events = [
            umuve("onboarding_screen_viewed", "dev-b", t - 26 * hour, #"{"page": 1}"#),
            umuve("onboarding_screen_viewed", "dev-a", t, #"{"page": 1}"#),
            umuve("onboarding_skipped", "dev-a", t + 60_000_000, "{}"),
            umuve("apple_sign_in_completed", "dev-a", t + 120_000_000, "{}"),
            umuve("main_screen_viewed", "dev-a", t + 180_000_000, "{}"),
        ]
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        // (converted, dropped) at step 1 -> 2, and the completers retention counts (eligible + pending on day 1).
        func counted() async throws -> [Int] {
            let drivers = try await pool.query(
                """
                SELECT COALESCE(sum(converted), 0)::int8, COALESCE(sum(dropped), 0)::int8 FROM funnel_driver_counts
                WHERE funnel = 'umuve_onboarding' AND kind = 'all' AND from_index = 1
                """
            ).rows.first
            let completers = try await pool.query(
                """
                SELECT COALESCE(sum(eligible + pending), 0)::int8 FROM funnel_retention
                WHERE funnel = 'umuve_onboarding' AND completed AND day_n = 1
                """
            ).scalar(Int.self)
            return [try drivers?.decode(Int.self, at: 0) ?? -1, try drivers?.decode(Int.self, at: 1) ?? -1, completers]
        }

        // An hour after: dev-a completed (counted so in the funnel), its window still open.
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental, now: t + hour) }
        #expect(try await counted() == [0, 1, 0])
        #expect(try await pool.query(
            "SELECT count(*) FROM funnel_persons WHERE completed AND NOT in_progress AND open_until = $1", [.microseconds(t + 24 * hour)]
        ).scalar(Int.self) == 1)
        #expect(try await pool.query("SELECT completed FROM funnel_cohorts WHERE funnel = 'umuve_onboarding' AND completed > 0").rows.count == 1)
        let early = try await pool.withConnection { try TableDump.dump($0) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: t + hour) }
        #expect(try await pool.withConnection { try TableDump.dump($0) } == early)

        // A day later, nothing new: dev-a's window closes in place and it counts.
        let later = try await pool.withConnection { c in try job.run(c, mode: .incremental, now: t + 25 * hour) }
        #expect(later.personsRecomputed == 0)
        #expect(later.windowsClosed == 1)
        #expect(try await counted() == [1, 1, 1])
        #expect(try await pool.query("SELECT count(*) FROM funnel_persons WHERE open_until IS NOT NULL").scalar(Int.self) == 0)
        let incremental = try await pool.withConnection { try TableDump.dump($0) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: t + 25 * hour) }
        #expect(try await pool.withConnection { try TableDump.dump($0) } == incremental)
        await pool.close()
        try await db.drop()
    }

    @Test("a late event showing an earlier user moves a device's events to that user, as a rebuild would")
    func relinkMovesDeviceToEarlierUser() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = self.job()
        let t = (Timestamps.microseconds(Date()) / 86_400_000_000 - 3) * 86_400_000_000 + 3_600_000_000  // 3 days ago, 01:00 UTC
        let second: Int64 = 1_000_000
        let umuve = { (event: String, anonymous: String?, user: String?, at: Int64, properties: String) in
            SeedEvent(app: "umuve", event: event, anonymousId: anonymous, userId: user, timestamp: at, properties: properties)
        }
        let persons = {
            try await pool.query(
                "SELECT person_id, level FROM funnel_persons WHERE funnel = 'umuve_onboarding' ORDER BY person_id"
            ).rows.map { "\(try $0.decode(String.self, at: 0)):\(try $0.decode(Int.self, at: 1))" }
        }
        let link = { try await pool.query("SELECT user_id FROM identity_links WHERE anonymous_id = 'dev-x'").scalar(String.self) }

        // Night 1: a device's first two steps, anonymous; it signs in as late-user. early-user starts elsewhere.
        let night1 = [
            umuve("onboarding_screen_viewed", "dev-x", nil, t, #"{"page": 1}"#),
            umuve("onboarding_skipped", "dev-x", nil, t + 10 * second, "{}"),
            umuve("apple_sign_in_completed", "dev-x", "late-user", t + 1_200 * second, "{}"),
            umuve("onboarding_screen_viewed", nil, "early-user", t + 5 * second, #"{"page": 1}"#),
        ]
        try await pool.withConnection { c in try EventSeeder.insert(c, night1) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        #expect(try await persons() == ["early-user:1", "late-user:3"])
        #expect(try await link() == "late-user")

        // Night 2: a delayed event shows the device with early-user before late-user signed in.
        let night2 = [umuve("profile_viewed", "dev-x", "early-user", t + 15 * second, "{}")]
        try await pool.withConnection { c in try EventSeeder.insert(c, night2) }
        let relinked = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        #expect(relinked.personsRecomputed == 2)  // early-user gains the device, late-user loses it
        #expect(try await link() == "early-user")
        // late-user keeps only its sign-in, with no first step: no longer in the funnel.
        #expect(try await persons() == ["early-user:2"])

        // Night 3: the device, still anonymous, goes on; its events are early-user's.
        let night3 = [umuve("main_screen_viewed", "dev-x", nil, t + 1_300 * second, "{}")]
        try await pool.withConnection { c in try EventSeeder.insert(c, night3) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        let incremental = try await pool.withConnection { try TableDump.dump($0) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild) }
        #expect(try await pool.withConnection { try TableDump.dump($0) } == incremental)
        #expect(try await persons() == ["early-user:2"])
        await pool.close()
        try await db.drop()
    }

    @Test("aliases join persons incrementally as on rebuild: server-side sign-ins, renames and loops, arriving in any order")
    func aliasesJoinPersonsAsOnRebuild() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = self.job()
        var events = EventSeeder.journeys(configuration: Self.configuration, personsPerFunnel: 150, seed: 21, aliases: true)
        var rng = SplitMix(seed: 3)
        events.shuffle(using: &rng)
        #expect(events.filter { $0.type == "alias" }.count > 30)
        let third = events.count / 3
        for part in [events[..<third], events[third..<2 * third], events[(2 * third)...]] {
            try await pool.withConnection { c in try EventSeeder.insert(c, Array(part)) }
            _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        }
        let incremental = try await pool.withConnection { try TableDump.dump($0) }

        // Every message's person, as analysts read it, is the engine's for the whole log.
        var links: [String: [String: IdentityLink]] = [:]
        for event in events where event.userId != nil {
            for id in [event.anonymousId, event.previousId].compactMap({ $0 }) {
                IdentityResolver.record(
                    IdentityObservation(anonymousId: id, userId: event.userId, timestamp: event.timestamp), into: &links[event.app, default: [:]])
            }
        }
        let byMessage = Dictionary(events.map { ("\($0.app)|\($0.messageId)", $0) }) { first, _ in first }
        var wrong: [String] = []
        for row in try await pool.query("SELECT app, message_id, person_id FROM analytics.events").rows {
            let app = try row.decode(String.self, at: 0), key = "\(app)|\(try row.decode(String.self, at: 1))"
            guard let event = byMessage[key] else { continue }
            let expected = IdentityResolver.personId(anonymousId: event.anonymousId, userId: event.userId, links: links[app] ?? [:])
            if try row.decode(String.self, at: 2) != expected { wrong.append(key) }
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
        // No stored person is an id whose links lead to another; renamed persons exist.
        let stray = try await pool.query(
            """
            SELECT count(*) FROM funnel_persons f
            JOIN identity_links l ON l.app = f.app AND l.anonymous_id = f.person_id AND l.person_id <> f.person_id
            """).scalar(Int.self)
        #expect(stray == 0)
        #expect(try await pool.query("SELECT count(*) FROM funnel_persons WHERE person_id LIKE '%-renamed'").scalar(Int.self) > 0)
        #expect(try await pool.query("SELECT count(*) FROM identity_links WHERE person_id <> user_id").scalar(Int.self) > 0)

        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild) }
        let afterRebuild = try await pool.withConnection { try TableDump.dump($0) }
        for table in TableDump.queries.keys.sorted() {
            #expect(afterRebuild[table] == incremental[table], "\(table) differs after rebuild")
        }
        await pool.close()
        try await db.drop()
    }

    @Test("a row with a lower seq that commits after a higher one was read is not stepped over")
    func lateCommitIsNotSkipped() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = self.job()
        let t = Timestamps.microseconds(Date()) - 5 * 86_400_000_000
        let slow = try Connection.connect(db.url)
        // A writer takes its seq and txid first, but commits last.
        try slow.executeScript("BEGIN")
        try EventSeederRaw.insertUncommitted(slow, SeedEvent(app: "forma", event: "onboarding_step_viewed", anonymousId: "slow", timestamp: t, properties: #"{"step": "welcome"}"#))
        try await pool.withConnection { c in
            try EventSeeder.insert(c, [SeedEvent(app: "forma", event: "onboarding_step_viewed", anonymousId: "fast", timestamp: t, properties: #"{"step": "welcome"}"#)])
        }
        let visible = try await pool.query("SELECT seq FROM events").rows.map { try $0.decode(Int64.self, at: 0) }
        let slowSeq = try slow.query("SELECT seq FROM events WHERE anonymous_id = 'slow'").scalar(Int64.self)
        #expect(visible.count == 1 && visible[0] > slowSeq)
        let first = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        #expect(first.newEvents == 1)  // only the committed row; the open writer's row is left for later
        try slow.executeScript("COMMIT")
        let second = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        #expect(second.newEvents == 1)  // the late-committing row, with the lower seq, is picked up
        let persons = try await pool.query("SELECT person_id FROM funnel_persons ORDER BY 1").rows.map { try $0.decode(String.self, at: 0) }
        #expect(persons == ["fast", "slow"])
        await pool.close()
        try await db.drop()
    }

    @Test("a second run while one holds the lock exits with a clear message and writes nothing")
    func concurrentRunsDoNotBothWrite() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 2)
        let job = self.job()
        try await pool.withConnection { c in
            try EventSeeder.insert(c, EventSeeder.journeys(configuration: Self.configuration, personsPerFunnel: 20, seed: 3))
        }
        let holder = try Connection.connect(db.url)
        #expect(try holder.query("SELECT pg_try_advisory_lock($1)", [.int(0x6f6e_7261_6d70_02)]).scalar(Bool.self))
        let error = await #expect(throws: ProjectionError.self) { try await pool.withConnection { c in try job.run(c, mode: .incremental) } }
        #expect(error?.code == .busy)
        #expect(error?.description.contains("another `onramp report`") == true)
        #expect(try await pool.query("SELECT count(*) FROM funnel_persons").scalar(Int.self) == 0)
        #expect(try await pool.query("SELECT horizon_txid FROM projection_checkpoint").scalar(Int64.self) == 0)
        #expect(try OnrampBinary.run(["report", "--database-url", db.url, "--quiet"]).stderr.contains("another `onramp report`"))
        _ = try holder.query("SELECT pg_advisory_unlock_all()")
        let summary = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        #expect(summary.personsRecomputed > 0)
        await pool.close()
        try await db.drop()
    }

    @Test("a rebuild takes statistics of the tables that have none, and leaves those that have them to autovacuum")
    func rebuildStatistics() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = self.job()
        try await pool.withConnection { c in
            try EventSeeder.insert(c, EventSeeder.journeys(configuration: Self.configuration, personsPerFunnel: 50, seed: 5))
        }
        let tables = ["identity_links", "funnel_persons", "funnel_daily"] + job.personTables
        let analyzed = """
            SELECT relname, analyze_count FROM pg_stat_user_tables WHERE relname = ANY($1) ORDER BY relname
            """
        let withoutStatistics = """
            SELECT string_agg(t, ', ' ORDER BY t) FROM unnest($1::text[]) AS t WHERE NOT EXISTS (SELECT 1 FROM pg_stats WHERE tablename = t)
            """
        func counts() async throws -> [String: Int] {
            Dictionary(uniqueKeysWithValues: try await pool.query(analyzed, [.textArray(tables)]).rows.map {
                (try $0.decode(String.self, at: 0), try $0.decode(Int.self, at: 1))
            })
        }
        #expect(try await counts().values.allSatisfy { $0 == 0 })
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild) }
        let first = try await counts()
        #expect(first.count == tables.count && first.values.allSatisfy { $0 == 1 }, "\(first)")
        // An empty table gets no statistics (here: no retention is due yet), and is sampled again, at no cost.
        var filled: [String] = []
        for table in tables where try await pool.query("SELECT EXISTS (SELECT 1 FROM \(table))").scalar(Bool.self) { filled.append(table) }
        #expect(filled.count >= 4)
        #expect(try await pool.query(withoutStatistics, [.textArray(filled)]).scalar(String?.self) == nil)
        // Statistics outlive the rebuild's TRUNCATE: the second keeps those it has.
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild) }
        #expect(try await pool.query(withoutStatistics, [.textArray(filled)]).scalar(String?.self) == nil)
        let second = try await counts()
        for table in tables { #expect(second[table] == (filled.contains(table) ? 1 : 2), "\(table)") }
        await pool.close()
        try await db.drop()
    }
}

enum EventSeederRaw {
    static func insertUncommitted(_ c: Connection, _ e: SeedEvent) throws {
        try c.query(
            """
            INSERT INTO events (app, type, message_id, event, anonymous_id, "timestamp", received_at, properties)
            VALUES ($1, 'track', $2, $3, $4, $5, now(), $6::jsonb)
            """, [.text(e.app), .text(e.messageId), .optional(e.event), .optional(e.anonymousId), .microseconds(e.timestamp), .text(e.properties)])
    }
}
