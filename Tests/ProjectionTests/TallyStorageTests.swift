import Foundation
import Funnels
import LibPQ
import LocalPostgres
@testable import Projection
import TestSupport
import Testing

/// The stored day tallies: their bytes, and the printed report they give.
@Suite("stored tallies")
struct TallyStorageTests {
    static let configuration = bundledConfiguration

    @Test("a tally survives its bytes, extremes included, and damaged bytes are an error, not a crash")
    func encodingRoundTrip() throws {
        let funnel = try #require(Self.configuration.funnel(named: "ops_employee"))
        var tally = FunnelTally(funnel: funnel)
        tally.started = 3
        tally.completed = 2
        tally.inProgress = 1
        tally.excluded = 7
        tally.durations = [400_000_000, -5, Int64.max, 0, Int64.min, 160_000_000]
        tally.steps[1] = FunnelTally.Step(persons: 2, dropOff: 1, inProgress: 1, gaps: [3, 1, 2, 1 << 40])
        tally.cohorts["2026-11-20"] = FunnelTally.Cohort(started: 3, completed: 2, inProgressPersons: 1, endOfDay: 1_763_683_200_000_000)
        tally.cohorts["1969-12-31"] = FunnelTally.Cohort(started: 1, endOfDay: -1)
        tally.breakdowns["properties.flow_version"] = [
            "v3": FunnelTally.Group(started: 2, completed: 2), "ünï 北京 🚀": FunnelTally.Group(started: 1, inProgress: 1),
        ]
        // Written before the per-version counts (version 1): reads back without them.
        #expect(try TallyEncoding.decode(TallyEncoding.encode(tally, as: 1), funnel: funnel) == tally.normalized())
        // Written before the per-step counts of breakdown values (version 2): reads back without them.
        var counted = tally
        counted.breakdowns["properties.flow_version"]?["v3"]?.steps = (0..<7).map { FunnelTally.Step(persons: 2 - min($0, 2) / 2, dropOff: $0 == 2 ? 1 : 0) }
        #expect(try TallyEncoding.decode(TallyEncoding.encode(counted, as: 2), funnel: funnel) == tally.normalized())
        #expect(try TallyEncoding.decode(TallyEncoding.encode(counted), funnel: funnel) == counted.normalized())
        tally.versions["3.4.0"] = FunnelTally.Version(
            started: 2, completed: 1, reached: [2, 2, 1, 1, 1, 0, 0], durations: [160_000_000, 5])
        tally.versions["3.3.2"] = FunnelTally.Version(started: 1, reached: [1, 0, 0, 0, 0, 0, 0])
        let bytes = TallyEncoding.encode(tally)
        #expect(try TallyEncoding.decode(bytes, funnel: funnel) == tally.normalized())
        #expect(TallyEncoding.encode(tally.normalized()) == bytes)

        for cut in [0, 1, bytes.count / 2, bytes.count - 1] {
            #expect(throws: TallyEncoding.Unreadable.self) { try TallyEncoding.decode(Array(bytes.prefix(cut)), funnel: funnel) }
        }
        #expect(throws: TallyEncoding.Unreadable.self) { try TallyEncoding.decode(bytes + [0], funnel: funnel) }
        let other = try #require(Self.configuration.funnel(named: "umuve_onboarding"))
        #expect(throws: TallyEncoding.Unreadable.self) { try TallyEncoding.decode(bytes, funnel: other) }
        var rng = SplitMix(seed: 5)
        for _ in 0..<2_000 {
            var damaged = bytes
            damaged[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next())
            _ = try? TallyEncoding.decode(damaged, funnel: funnel)  // any answer but a trap
        }
    }

    @Test("the nightly run's report, its stored days read under the run's snapshot and the days it rewrote read after the commit, equals the report read afresh: all funnels, a range and selection, another time zone")
    func nightlyReportEqualsFreshReport() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = ProjectionJob(configuration: Self.configuration, showProgress: false)
        let events = EventSeeder.journeys(configuration: Self.configuration, personsPerFunnel: 250, seed: 7)
        // Four parts in time: the first for a first run, one more before each report compared.
        let times = events.map(\.timestamp).sorted()
        let cuts = [Int64.min] + [times.count / 2, times.count * 2 / 3, times.count * 5 / 6].map { times[$0] } + [Int64.max]
        let parts = cuts.indices.dropLast().map { index in events.filter { $0.timestamp >= cuts[index] && $0.timestamp < cuts[index + 1] } }
        let now = Timestamps.microseconds(Date())
        try await pool.withConnection { c in try EventSeeder.insert(c, parts[0]) }
        _ = try await NightlyRun.run(job, mode: .incremental, query: ReportQuery(), databaseURL: db.url, now: now)
        let second = try #require(try await pool.query("SELECT (min(cohort_day) + 1)::text FROM funnel_cohorts").first?.decode(String.self, at: 0))
        let queries = [
            ReportQuery(), ReportQuery(from: second, funnels: ["yoked_onboarding", "forma_onboarding"]),
            ReportQuery(timeZoneOverride: "America/Los_Angeles"),
        ]
        for (index, query) in queries.enumerated() {
            try await pool.withConnection { c in try EventSeeder.insert(c, parts[index + 1]) }
            let nightly = try await NightlyRun.run(job, mode: .incremental, query: query, databaseURL: db.url, now: now)
            let fresh = try await pool.withConnection { c in try query.results(c, configuration: Self.configuration, now: now) }
            #expect(nightly.results.map(\.report) == fresh.map(\.report), "query \(index)")
            #expect(nightly.results.map { $0.secondsToComplete.sorted() } == fresh.map { $0.secondsToComplete.sorted() }, "query \(index)")
            #expect(!fresh.isEmpty)
            // The run rewrote some of the stored days and kept others: both halves were read.
            let days = try await pool.query("SELECT count(DISTINCT (funnel, cohort_day)) FROM funnel_tallies").scalar(Int.self)
            #expect(nightly.summary.cohortDaysRewritten > 0 && nightly.summary.cohortDaysRewritten < days, "query \(index)")
        }
        await pool.close()
        try await db.drop()
    }

    @Test("the report summed from day tallies equals the report over every stored person, for all history and a range")
    func tallyReportEqualsPersonReport() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = ProjectionJob(configuration: Self.configuration, showProgress: false)
        let events = EventSeeder.journeys(configuration: Self.configuration, personsPerFunnel: 250, seed: 3)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        // Reports are read at the run's time, as `onramp report` does: the stored retention was counted then.
        let now = Timestamps.microseconds(Date())
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental, now: now) }
        #expect(try await pool.query("SELECT count(*) FROM funnel_tallies").scalar(Int.self) > 20)
        #expect(try await pool.query("SELECT count(DISTINCT time_zone) FROM funnel_tallies").scalar(Int.self) == 1)

        let days = try await pool.query("SELECT min(cohort_day)::text, max(cohort_day)::text FROM funnel_cohorts").first
        let from = try #require(try days?.decode(String.self, at: 0))
        for range in [(String?.none, String?.none), (from, from), (from, nil)] {
            // The same zone under another name ("Etc/UTC") is not the stored one, so that
            // query takes the slow path: every person's outcome, day cut again.
            let fromTallies = try await pool.withConnection { c in
                try ReportQuery(from: range.0, to: range.1, timeZoneOverride: "UTC").results(c, configuration: Self.configuration, now: now)
            }
            let fromPersons = try await pool.withConnection { c in
                try ReportQuery(from: range.0, to: range.1, timeZoneOverride: "Etc/UTC").results(c, configuration: Self.configuration, now: now)
            }
            #expect(fromTallies.count == Self.configuration.funnels.count)
            for (a, b) in zip(fromTallies, fromPersons) {
                var relabelled = b.report
                relabelled.timeZone = a.report.timeZone
                #expect(a.report == relabelled, "\(a.report.funnel) \(range)")
                #expect(a.secondsToComplete.sorted() == b.secondsToComplete.sorted())
            }
            #expect(fromTallies.contains { $0.report.completed > 10 && $0.report.cohorts.count >= (range.1 == nil ? 2 : 1) })
        }
        await pool.close()
        try await db.drop()
    }

    @Test("days stored before tallies existed get theirs on the next incremental run")
    func missingTalliesAreFilledIn() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = ProjectionJob(configuration: Self.configuration, showProgress: false)
        let events = EventSeeder.journeys(configuration: Self.configuration, personsPerFunnel: 60, seed: 9)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        let complete = try await pool.withConnection { try TableDump.dump($0) }
        try await pool.query("DELETE FROM funnel_tallies")
        let summary = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        #expect(summary.newEvents == 0)
        #expect(try await pool.withConnection { try TableDump.dump($0) } == complete)
        await pool.close()
        try await db.drop()
    }

    @Test("days stored before the per-version counts: the report counts them from the persons, regressions included, and a rebuild stores them whole")
    func talliesWithoutVersions() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = ProjectionJob(configuration: Self.configuration, showProgress: false)
        let now = Date()
        let events = SimulatedHistory.events(count: 30_000, from: 40, seed: 21, apps: ["yoked"], now: now)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild) }
        let clock = Timestamps.microseconds(now)
        let query = ReportQuery(funnels: ["yoked_onboarding"])
        let before = try await pool.withConnection { c in try query.results(c, configuration: Self.configuration, now: clock) }
        #expect(before.first.map { !$0.report.regressions.tested.isEmpty } == true)
        // Rewrite every day's tally in the form written before the per-version counts.
        let funnel = try #require(Self.configuration.funnel(named: "yoked_onboarding"))
        try await pool.withConnection { c in
            var rows: [(String, [UInt8])] = []
            try c.forEachRow("SELECT cohort_day::text, tally FROM funnel_tallies WHERE funnel = 'yoked_onboarding'", []) { row in
                let tally = try TallyEncoding.decode(try row.decode(PostgresBytes.self, at: 1).bytes, funnel: funnel)
                rows.append((try row.decode(String.self, at: 0), TallyEncoding.encode(tally, as: 1)))
            }
            for (day, bytes) in rows {
                try c.query(
                    "UPDATE funnel_tallies SET tally = $1 WHERE funnel = 'yoked_onboarding' AND cohort_day = $2::date",
                    [.bytes(bytes), .text(day)])
            }
        }
        let after = try await pool.withConnection { c in try query.results(c, configuration: Self.configuration, now: clock) }
        #expect(after.first?.report == before.first?.report)
        #expect(after.first?.report.regressions == before.first?.report.regressions)
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild) }
        #expect(try await pool.query("SELECT count(*) FROM funnel_tallies WHERE get_byte(tally, 0) <> \(TallyEncoding.version)").scalar(Int.self) == 0)
        await pool.close()
        try await db.drop()
    }
}
