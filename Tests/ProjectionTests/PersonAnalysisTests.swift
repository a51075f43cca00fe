import Explore
import Foundation
import Funnels
import LibPQ
import LocalPostgres
@testable import Projection
import Reports
import TestSupport
import Testing

/// A per-person analysis plugs into the job as one type and its tables: the
/// job, both plans and the report serve it without naming it, and incremental
/// runs leave its tables as a rebuild writes them. The same type, added to a
/// query, is counted at query time and reaches `onramp funnel`'s JSON.
@Suite struct PersonAnalysisTests {
    /// Events per person before dropping: for each started person who has not
    /// completed, their events from the start to the window's end; per cohort
    /// day, of those whose window has closed, the persons and their events.
    struct EventsBeforeDropping: PersonAnalysis {
        let table = "test_drop_events"
        let copyStatement = "COPY test_drop_events (app, person_id, funnel, cohort_day, events) FROM STDIN (FORMAT binary)"
        let dayTables = ["test_drop_event_days"]

        struct Counts: DayCounts {
            var persons = 0
            var events = 0

            mutating func merge(_ other: Counts) {
                persons += other.persons
                events += other.events
            }

            mutating func subtract(_ other: Counts) {
                persons -= other.persons
                events -= other.events
            }
        }

        typealias Tally = DayTally<Counts>

        let id = AnalysisID(rawValue: "events_before_dropping")
        let readsEveryEvent = true

        /// A day counts those whose window has closed, as `append` counts them.
        func count(_ outcome: PersonOutcome, in funnel: Funnel, events: [FunnelEvent], into counts: inout Counts) -> Bool {
            guard outcome.level >= 1, !outcome.excluded, !outcome.completed, outcome.windowClosed, let start = outcome.startTime else { return false }
            let end = start + funnel.windowMicroseconds
            counts.merge(Counts(persons: 1, events: events.count { $0.timestamp >= start && $0.timestamp <= end }))
            return true
        }

        /// No field of the report is its own: it reports as an `AnalysisFinding`.
        func fill(_ report: inout FunnelReport, funnel: Funnel, tally: FunnelTally, days: [String: Counts], now: Int64) {
            func fields(_ counts: Counts) -> AnalysisFinding {
                .fields([.init("persons", .number(Double(counts.persons))), .init("events", .number(Double(counts.events)))])
            }
            report.analyses[id] = .fields(days.sorted { $0.key < $1.key }.map { AnalysisFinding.Field($0.key, fields($0.value)) })
        }

        func append(
            _ evaluated: EvaluatedFunnel, events: [FunnelEvent], to rows: inout BinaryCopyRows, tally: inout (any AnalysisTally)?
        ) throws {
            let outcome = evaluated.outcome, funnel = evaluated.funnel
            guard outcome.level >= 1, !outcome.excluded, !outcome.completed, let start = outcome.startTime else { return }
            let end = start + funnel.windowMicroseconds
            let count = events.count { $0.timestamp >= start && $0.timestamp <= end }
            if outcome.windowClosed { Tally.update(&tally) { $0.counts.merge(Counts(persons: 1, events: count)) } }
            rows.startRow(fields: 5)
            _ = rows.append(text: funnel.app) && rows.append(text: evaluated.person) && rows.append(text: funnel.name)
            rows.append(date: evaluated.cohortDay)
            rows.append(int32: Int32(clamping: count))
        }

        /// Those whose window closes in place join their days.
        func storedDayChange(_ c: Connection, now: Int64, activity: [PersonActivity], dialect: SQLDialect) throws -> StoredDayChange {
            var change = StoredDayChange()
            try forEachCounted(c, from: "funnel_persons p", where: OutcomeStore.closingInPlace, [.microseconds(now)]) { day, events in
                Tally.update(&change.added[day]) { $0.counts.merge(Counts(persons: 1, events: events)) }
            }
            return change
        }

        func touchedDayParts(_ c: Connection, dialect: SQLDialect) throws -> [FunnelDay: any AnalysisTally] {
            var parts: [FunnelDay: any AnalysisTally] = [:]
            try forEachCounted(c, from: Self.touchedOutcomes(dialect), where: OutcomeStore.windowClosed, []) { day, events in
                Tally.update(&parts[day]) { $0.counts.merge(Counts(persons: 1, events: events)) }
            }
            return parts
        }

        private func forEachCounted(
            _ c: Connection, from: String, where filter: String, _ parameters: [PostgresValue], _ body: (FunnelDay, Int) throws -> Void
        ) throws {
            try c.forEachRow(
                """
                SELECT p.funnel, p.cohort_day::text, d.events FROM \(from)
                JOIN test_drop_events d ON d.app = p.app AND d.person_id = p.person_id AND d.funnel = p.funnel
                WHERE \(filter) AND p.level >= 1 AND NOT p.excluded AND NOT p.completed
                """, parameters
            ) { row in
                try body(FunnelDay(funnel: try row.decode(String.self, at: 0), day: try row.decode(String.self, at: 1)), try row.decode(Int.self, at: 2))
            }
        }

        func storedDays(_ c: Connection, funnels: [Funnel], days: Set<FunnelDay>) throws -> [String: [String: any AnalysisTally]] {
            var stored: [String: [String: any AnalysisTally]] = [:]
            try c.forEachRow(
                "SELECT funnel, cohort_day::text, persons, events FROM test_drop_event_days WHERE \(FunnelDay.anyOf)", FunnelDay.parameters(days)
            ) { row in
                stored[try row.decode(String.self, at: 0), default: [:]][try row.decode(String.self, at: 1)] = Tally(
                    counts: Counts(persons: try row.decode(Int.self, at: 2), events: try row.decode(Int.self, at: 3)))
            }
            return stored
        }

        func rewriteDays(
            into writes: inout DayTableWrites, funnel: Funnel, days: [String], counted: [String: any AnalysisTally],
            stored: [String: any AnalysisTally], change: StoredDayChange?, now: Int64
        ) throws {
            let tallies = dayTallies(stored, empty: Tally(), funnel: funnel, days: days, counted: counted, change: change)
            deleteDays(&writes, funnel: funnel, days: days)
            try writes.copy("COPY test_drop_event_days (funnel, app, cohort_day, persons, events) FROM STDIN") { w in
                for (day, tally) in tallies where tally.counts.persons > 0 {
                    try w.append([.text(funnel.name), .text(funnel.app), .text(day), .int(Int64(tally.counts.persons)),
                                  .int(Int64(tally.counts.events))])
                }
            }
        }
    }

    static let tables = """
        CREATE TABLE test_drop_events (
            app text, person_id text, funnel text, cohort_day date, events int, PRIMARY KEY (app, person_id, funnel));
        CREATE TABLE test_drop_event_days (funnel text, app text, cohort_day date, persons int, events int)
        """

    @Test("an analysis added as one type and its tables: after incremental runs, with windows closing in place, both equal a rebuild's")
    func incrementalRunsKeepAnAnalysisEqualToARebuild() async throws {
        let configuration = bundledConfiguration
        let hour: Int64 = 3_600_000_000
        let events = EventSeeder.journeys(configuration: configuration, personsPerFunnel: 120, seed: 33, detours: true)
            .sorted { $0.timestamp < $1.timestamp }
        // Three nights, each after a third of the events: windows open at
        // one night close in place by the next.
        let third = events.count / 3
        let parts = [Array(events.prefix(third)), Array(events.dropFirst(third).prefix(third)), Array(events.dropFirst(2 * third))]
        let nights = parts.map { ($0.last?.timestamp ?? 0) + hour }
        var configured = ProjectionJob(configuration: configuration, showProgress: false)
        configured.analyses.append(EventsBeforeDropping())
        configured.options.eventsPerPartition = 200
        let job = configured
        let dumps = [
            "SELECT concat_ws('|', app, person_id, funnel, cohort_day, events) FROM test_drop_events ORDER BY 1",
            "SELECT concat_ws('|', funnel, app, cohort_day, persons, events) FROM test_drop_event_days ORDER BY 1",
            "SELECT concat_ws('|', funnel, cohort_day, step_index, label, persons) FROM funnel_dropoff_next ORDER BY 1",
        ]
        // The day table as plain SQL counts it from the persons' rows.
        let independent = """
            SELECT concat_ws('|', p.funnel, p.app, p.cohort_day, count(*), sum(d.events)) FROM funnel_persons p
            JOIN test_drop_events d USING (app, person_id, funnel)
            WHERE NOT p.in_progress AND p.open_until IS NULL AND p.level >= 1 AND NOT p.excluded AND NOT p.completed
            GROUP BY p.funnel, p.app, p.cohort_day ORDER BY 1
            """
        var tables: [[[String]]] = []
        var closedInPlace = 0
        for incremental in [true, false] {
            let db = try await TestDatabase.create()
            let pool = db.pool(maxConnections: 1)
            try await pool.withConnection { c in try c.executeScript(Self.tables) }
            if incremental {
                for (night, (part, now)) in zip(parts, nights).enumerated() {
                    try await pool.withConnection { c in try EventSeeder.insert(c, part) }
                    let summary = try await pool.withConnection { c in try job.run(c, mode: night == 0 ? .rebuild : .incremental, now: now) }
                    closedInPlace += summary.windowsClosed
                }
            } else {
                try await pool.withConnection { c in try EventSeeder.insert(c, events) }
                _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: nights[2]) }
            }
            var dumped: [[String]] = []
            for sql in dumps + [independent] { dumped.append(try await pool.query(sql).rows.map { try $0.decode(String.self, at: 0) }) }
            tables.append(dumped)
            await pool.close()
            try await db.drop()
        }
        #expect(closedInPlace > 0, "some windows closed in place between nights")
        #expect(tables[0][0].count > 100 && tables[0][1].count > 5, "\(tables[0][0].count) persons, \(tables[0][1].count) days")
        for (index, sql) in dumps.enumerated() { #expect(tables[0][index] == tables[1][index], "\(sql)") }
        #expect(tables[0][1] == tables[0][3], "the day table equals plain SQL's count from the persons")
    }

    @Test("the analysis added to a query through the query-time API is counted as the night stores it, and is in onramp funnel's JSON")
    func anAnalysisAddedToAQueryIsInItsJSON() async throws {
        let configuration = bundledConfiguration
        let events = EventSeeder.journeys(configuration: configuration, personsPerFunnel: 120, seed: 33, detours: true)
        let now = (events.map(\.timestamp).max() ?? 0) + 3_600_000_000
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("explore-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        try await pool.withConnection { c in
            try c.executeScript(Self.tables)
            try EventSeeder.insert(c, events)
        }
        var job = ProjectionJob(configuration: configuration, showProgress: false)
        job.analyses.append(EventsBeforeDropping())
        let night = job
        _ = try await pool.withConnection { c in try night.run(c, mode: .rebuild, now: now) }

        for funnel in configuration.funnels.prefix(2) {
            // What the night stored, by day.
            let stored = try await pool.query(
                "SELECT cohort_day::text, persons, events FROM test_drop_event_days WHERE funnel = $1 AND persons > 0 ORDER BY 1",
                [.text(funnel.name)]
            ).rows.map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(Int.self, at: 1)) \(try $0.decode(Int.self, at: 2))" }
            #expect(!stored.isEmpty, "\(funnel.name): persons dropped")

            let zone = configuration.app(named: funnel.app)?.timeZone ?? configuration.reportTimeZone ?? "UTC"
            var query = FunnelQuery(funnel: funnel, timeZone: zone, now: now)
            query.analyses.append(EventsBeforeDropping())
            let asked = query
            for round in 0..<2 {
                let answer = try await pool.withConnection { c in try Explorer(cacheRoot: cache).answer(asked, on: c) }
                #expect(answer.reusedAnswer == (round == 1), "the second asking is answered from the cache")
                let json = QueryTimeJSON.render(
                    answer.report, histogram: answer.histogram, query: .init(asOf: "", from: nil, to: nil, events: answer.events))
                let document = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
                let days = try #require((document["analyses"] as? [String: Any])?["events_before_dropping"] as? [String: [String: Double]])
                let printed = days.keys.sorted().map { day in "\(day) \(Int(days[day]?["persons"] ?? -1)) \(Int(days[day]?["events"] ?? -1))" }
                #expect(printed == stored, "\(funnel.name), round \(round)")
            }
        }
        await pool.close()
        try await db.drop()
    }
}
