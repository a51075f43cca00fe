import Foundation
import Funnels
import LibPQ
import LocalPostgres
@testable import Projection
import TestSupport
import Testing

/// Retention (docs/funnels.md, "Retention") computed a second way: plain SQL over
/// `analytics.events` and `analytics.funnel_persons`, straight from the
/// definition, and the two-proportion test by its textbook formula. The
/// stored tables and the report must match it, after incremental runs fed
/// late activity, and equal a rebuild's.
@Suite struct RetentionReferenceTests {
    static let day: Int64 = 86_400_000_000

    /// The bundled funnels, one of them with its own days and active events.
    static let configuration: FunnelConfiguration = {
        var configuration = bundledConfiguration
        configuration.funnels[0].retention = RetentionSettings(
            days: [0, 1, 3, 7, 14, 30], activeEvents: [.event("app_opened"), .screen("Home")])
        return configuration
    }()

    /// Everyday use after onboarding for every journey's device: some days of
    /// the following five weeks, of several kinds, some exactly on a day's
    /// edges, some identified, and a few on the first day (inside windows).
    static func activity(after journeys: [SeedEvent], seed: UInt64) -> [SeedEvent] {
        var rng = SplitMix(seed: seed)
        var first: [String: SeedEvent] = [:]
        for event in journeys {
            guard let anonymous = event.anonymousId else { continue }
            if first[anonymous].map({ event.timestamp < $0.timestamp }) ?? true { first[anonymous] = event }
        }
        var events: [SeedEvent] = []
        for (anonymous, start) in first.sorted(by: { $0.key < $1.key }) {
            let user = journeys.first { $0.anonymousId == anonymous && $0.userId != nil }?.userId
            let keen = rng.next() % 2 == 0
            for offset in 0...35 where rng.unit() < (keen ? 0.45 : 0.15) {
                let pick = Int(rng.next() % 5)
                let (type, name): (String, String?) =
                    pick == 0 ? ("track", "app_opened") : pick == 1 ? ("screen", "Home") : pick == 2 ? ("page", "Pricing")
                    : pick == 3 ? ("identify", nil) : ("track", "item_viewed")
                var time = start.timestamp + Int64(offset) * day + Int64(rng.next() % 86_400) * 1_000_000
                switch rng.next() % 6 {
                case 0: time = start.timestamp + Int64(offset) * day  // the day's first instant
                case 1: time = start.timestamp + Int64(offset + 1) * day - 1  // its last
                default: break
                }
                events.append(SeedEvent(
                    app: start.app, type: type, messageId: "\(anonymous)-use-\(offset)-\(events.count)", event: name,
                    anonymousId: anonymous, userId: rng.next() % 3 == 0 ? user : nil, timestamp: time, context: start.context))
            }
        }
        return events
    }

    @Test("retention after incremental runs with late activity equals a rebuild's and plain SQL's, number for number")
    func equalsPlainSQL() async throws {
        let configuration = Self.configuration
        let journeys = EventSeeder.journeys(configuration: configuration, personsPerFunnel: 200, seed: 12, daysAgo: 33, detours: true)
        let activity = Self.activity(after: journeys, seed: 5)
        let now = Timestamps.microseconds(Date())
        // A third of the activity arrives after a first run, most of it long after onboarding.
        let late = Set(activity.indices.filter { $0 % 3 == 0 })
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        var job = ProjectionJob(configuration: configuration, showProgress: false)
        job.options.eventsPerPartition = 700
        let configured = job
        let (second, third) = try await pool.withConnection { c in
            try EventSeeder.insert(c, journeys + activity.indices.filter { !late.contains($0) }.map { activity[$0] })
            _ = try configured.run(c, mode: .incremental, now: now - 3 * Self.day)
            try EventSeeder.insert(c, late.sorted().map { activity[$0] })
            let second = try configured.run(c, mode: .incremental, now: now - 3 * Self.day)
            // Three days later, nothing new: persons become eligible by the clock alone.
            let third = try configured.run(c, mode: .incremental, now: now)
            return (second, third)
        }
        let lateDevices = Set(late.map { activity[$0].anonymousId })
        #expect(second.personsRecomputed > 0 && second.personsRecomputed < lateDevices.count / 2, "\(second) of \(lateDevices.count)")
        #expect(third.personsRecomputed == 0 && third.cohortDaysRewritten == 0, "\(third)")

        @Sendable func retentionRows(_ c: Connection) throws -> [String] {
            try c.query(TableDump.retentionQuery).rows.map { row in (0..<row.count).map { row.text(at: $0) ?? "∅" }.joined(separator: "|") }
        }
        let incremental = try await pool.withConnection { try TableDump.dump($0) }
        let incrementalCells = try await pool.withConnection { try retentionRows($0) }
        let reports = try await pool.withConnection { c in try ReportQuery().results(c, configuration: configuration, now: now) }
        // As `onramp report` reads them, the funnels shared out over two sessions: the same reports, in the same order.
        let besides = try await pool.withConnection { c in
            try ReportQuery().results(c, configuration: configuration, now: now)
        }
        #expect(besides.map(\.report) == reports.map(\.report))
        #expect(besides.map { $0.secondsToComplete.sorted() } == reports.map { $0.secondsToComplete.sorted() })
        #expect(reports.count == configuration.funnels.count)
        _ = try await pool.withConnection { c in try configured.run(c, mode: .rebuild, now: now) }
        let rebuilt = try await pool.withConnection { try TableDump.dump($0) }
        // Both at `now`: the cells are the clock's.
        #expect(try await pool.withConnection { try retentionRows($0) } == incrementalCells)
        #expect(incrementalCells.count > 50)
        for table in ["funnel_person_retention", "funnel_retention_starts", "funnel_persons"] {
            #expect(incremental[table] == rebuilt[table], "\(table)")
            #expect((rebuilt[table]?.count ?? 0) > 50, "\(table)")
        }

        var checked = 0
        for (funnel, result) in zip(configuration.funnels, reports) {
            let reference = try await pool.withConnection { c in try RetentionReference.cells(c, funnel: funnel, now: now) }
            let stored = try await pool.withConnection { c in
                try c.query(
                    """
                    SELECT cohort_day::text, day, outcome = 'completers', eligible, retained, pending
                    FROM analytics.funnel_retention WHERE funnel = $1
                    """, [.text(funnel.name)]
                ).rows.map { row in
                    RetentionReference.Cell(
                        cohortDay: try row.decode(String.self, at: 0), day: try row.decode(Int.self, at: 1),
                        completed: try row.decode(Bool.self, at: 2), eligible: try row.decode(Int.self, at: 3),
                        retained: try row.decode(Int.self, at: 4), pending: try row.decode(Int.self, at: 5))
                }
            }
            #expect(Set(stored) == Set(reference), "\(funnel.name)")
            let retention = try #require(result.report.retention)
            #expect(retention.days.map(\.day) == funnel.retention.days)
            for day in retention.days {
                let label = "\(funnel.name) day \(day.day)"
                for (side, completed) in [(day.completers, true), (day.nonCompleters, false)] {
                    let cells = reference.filter { $0.day == day.day && $0.completed == completed }
                    #expect(side.eligible == cells.map(\.eligible).reduce(0, +), "\(label)")
                    #expect(side.retained == cells.map(\.retained).reduce(0, +), "\(label)")
                    #expect(side.pending == cells.map(\.pending).reduce(0, +), "\(label)")
                }
                guard day.completers.eligible > 0, day.nonCompleters.eligible > 0 else {
                    #expect(day.pValue == nil || day.difference == nil, "\(label)")
                    continue
                }
                let (difference, p) = RetentionReference.twoProportion(
                    day.completers.retained, day.completers.eligible, day.nonCompleters.retained, day.nonCompleters.eligible)
                #expect(abs((day.difference ?? .nan) - difference) < 1e-12, "\(label)")
                #expect(abs((day.pValue ?? .nan) - p) <= 1e-9 * max(p, 1e-300) + 1e-15, "\(label)")
                checked += 1
            }
            // Per cohort day, the same cells.
            for cohort in retention.cohorts {
                for day in cohort.days {
                    let cell = reference.first { $0.cohortDay == cohort.day && $0.day == day.day && $0.completed }
                    #expect(day.completers.eligible == cell?.eligible ?? 0, "\(funnel.name) \(cohort.day) \(day.day)")
                    #expect(day.completers.retained == cell?.retained ?? 0, "\(funnel.name) \(cohort.day) \(day.day)")
                }
            }
        }
        #expect(checked >= 10)
        // Retained and not: both happen, and pending days exist (D30 of the last cohorts).
        let totals = reports.compactMap(\.report.retention).flatMap(\.days)
        #expect(totals.contains { $0.completers.retained > 0 && $0.completers.retained < $0.completers.eligible })
        #expect(totals.contains { $0.nonCompleters.pending > 0 })
        await pool.close()
        try await db.drop()
    }

    @Test("eligibility at the edges: day N spans [t1 + N·24 h, t1 + (N+1)·24 h) and is counted only once that has passed; the clock alone and late activity update it, with nobody recomputed")
    func edges() async throws {
        let configuration = try FunnelConfiguration.parse(
            yaml: """
                apps: [{name: edge}]
                funnels:
                  - name: edge_onboarding
                    app: edge
                    steps: [{event: started}, {event: finished}]
                """, source: "edge.yaml")
        let t1 = (Timestamps.microseconds(Date()) / Self.day - 60) * Self.day + 3_600_000_000
        @Sendable func event(_ name: String?, _ time: Int64, type: String = "track", id: String = UUID().uuidString) -> SeedEvent {
            SeedEvent(app: "edge", type: type, messageId: id, event: name, anonymousId: "device", timestamp: time)
        }
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        func cells() async throws -> [String] {
            try await pool.query(
                "SELECT day, outcome, eligible, retained, pending FROM analytics.funnel_retention ORDER BY day, outcome"
            ).rows.map { row in (0..<row.count).map { row.text(at: $0) ?? "∅" }.joined(separator: " ") }
        }
        func run(_ now: Int64) async throws -> ProjectionJob.Summary {
            try await pool.withConnection { c in try job.run(c, mode: .incremental, now: now) }
        }
        func rebuilt(_ now: Int64) async throws -> [String] {
            let before = try await cells()
            _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: now) }
            #expect(try await cells() == before, "a rebuild at the same time gives the same rows")
            return before
        }
        try await pool.withConnection { c in
            try EventSeeder.insert(c, [
                event("started", t1), event("finished", t1 + 60_000_000),
                // Day 1's first instant; day 7's last; day 31 (not day 30).
                event("opened", t1 + Self.day), event(nil, t1 + 8 * Self.day - 1, type: "identify"),
                event("opened", t1 + 31 * Self.day),
            ])
        }
        // Exactly t1 + 8·24 h: day 7 has not passed.
        _ = try await run(t1 + 8 * Self.day)
        #expect(try await rebuilt(t1 + 8 * Self.day) == [
            "1 completers 1 1 0", "1 non_completers 0 0 0", "7 completers 0 0 1", "7 non_completers 0 0 0",
            "30 completers 0 0 1", "30 non_completers 0 0 0",
        ])
        // A microsecond later it has, with nothing new in the log.
        let clock = try await run(t1 + 8 * Self.day + 1)
        #expect(clock.personsRecomputed == 0)
        #expect(try await cells()[2] == "7 completers 1 1 0")
        let day31 = t1 + 31 * Self.day + 1
        _ = try await run(day31)
        #expect(try await rebuilt(day31)[4] == "30 completers 1 0 0")
        // Activity on day 30, arriving late: the record gains it; nobody is recomputed.
        try await pool.withConnection { c in try EventSeeder.insert(c, [event("opened", t1 + 30 * Self.day + 5_000_000)]) }
        let late = try await run(day31)
        #expect(late.personsRecomputed == 0 && late.newEvents == 1)
        #expect(try await rebuilt(day31)[4] == "30 completers 1 1 0")
        #expect(try await pool.query("SELECT retained_days::text FROM funnel_person_retention").scalar(String.self) == "{1,7,30}")
        // Activity inside the window is recomputed (the drop-off facts read it), as is a step's event.
        try await pool.withConnection { c in try EventSeeder.insert(c, [event("opened", t1 + 120_000_000)]) }
        #expect(try await run(day31).personsRecomputed == 1)
        try await pool.withConnection { c in try EventSeeder.insert(c, [event("finished", t1 + 40 * Self.day)]) }
        #expect(try await run(day31).personsRecomputed == 1)
        await pool.close()
        try await db.drop()
    }
}

/// The definition, in SQL an analyst would write from docs/funnels.md.
private enum RetentionReference {
    struct Cell: Hashable {
        var cohortDay: String
        var day: Int
        var completed: Bool
        var eligible: Int
        var retained: Int
        var pending: Int
    }

    static func cells(_ c: Connection, funnel: Funnel, now: Int64) throws -> [Cell] {
        let active = funnel.retention.activeEvents
        let tracks = active.filter { $0.kind == .event }.map(\.name), screens = active.filter { $0.kind == .screen }.map(\.name)
        return try c.query(
            """
            WITH persons AS (
                SELECT p.app, p.person_id, p.cohort_day, p.completed, p.start_time FROM analytics.funnel_persons p
                WHERE p.funnel = $1 AND NOT p.in_progress AND NOT p.excluded AND p.level >= 1
                  -- A completer's window closes at their chain's start plus the window.
                  AND (NOT p.completed OR p.chain_start_time + make_interval(secs => $7) <= to_timestamp($3 / 1e6))
            ), days AS (SELECT unnest($2::int[]) AS n)
            SELECT p.cohort_day::text, d.n, p.completed,
                   count(*) FILTER (WHERE p.start_time + (d.n + 1) * interval '1 day' < to_timestamp($3 / 1e6)),
                   count(*) FILTER (WHERE p.start_time + (d.n + 1) * interval '1 day' < to_timestamp($3 / 1e6) AND EXISTS (
                       SELECT 1 FROM analytics.events e
                       WHERE e.app = p.app AND e.person_id = p.person_id
                         AND e."timestamp" >= p.start_time + d.n * interval '1 day'
                         AND e."timestamp" < p.start_time + (d.n + 1) * interval '1 day'
                         AND ($6 OR (e.type = 'track' AND e.event = ANY($4)) OR (e.type = 'screen' AND e.event = ANY($5))))),
                   count(*) FILTER (WHERE NOT p.start_time + (d.n + 1) * interval '1 day' < to_timestamp($3 / 1e6))
            FROM persons p CROSS JOIN days d
            GROUP BY 1, 2, 3
            """,
            [.text(funnel.name), .text("{" + funnel.retention.days.map(String.init).joined(separator: ",") + "}"),
             .int(now), .textArray(tracks), .textArray(screens), .bool(active.isEmpty), .double(Double(funnel.windowSeconds))]
        ).rows.map { row in
            Cell(
                cohortDay: try row.decode(String.self, at: 0), day: try row.decode(Int.self, at: 1),
                completed: try row.decode(Bool.self, at: 2), eligible: try row.decode(Int.self, at: 3),
                retained: try row.decode(Int.self, at: 4), pending: try row.decode(Int.self, at: 5))
        }
    }

    /// Difference of the rates and the pooled two-proportion z-test's two-sided p.
    static func twoProportion(_ k1: Int, _ n1: Int, _ k2: Int, _ n2: Int) -> (Double, Double) {
        let p1 = Double(k1) / Double(n1), p2 = Double(k2) / Double(n2)
        let pooled = Double(k1 + k2) / Double(n1 + n2)
        let se = (pooled * (1 - pooled) * (1 / Double(n1) + 1 / Double(n2))).squareRoot()
        guard se > 0 else { return (p1 - p2, 1) }
        return (p1 - p2, erfc(abs(p1 - p2) / se / 2.0.squareRoot()))
    }
}
