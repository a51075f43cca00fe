import Foundation
import Funnels
import LibPQ
import LocalPostgres
@testable import Projection
import TestSupport
import Testing

/// The drop-off diagnostics (docs/funnels.md, "Why they drop off") computed a second way: plain SQL over
/// `analytics.events` and `analytics.funnel_persons.step_times`, as an
/// analyst would write it from docs/funnels.md, and the statistics by their
/// textbook definitions (Fisher's test summed over every table with the
/// margins, in log-gamma; Benjamini–Hochberg as the minimum over ranks).
/// Every number of every funnel's report must match.
@Suite struct DropOffReferenceTests {
    @Test("diagnostics after incremental runs with late events equal a rebuild's and plain SQL's, number for number")
    func equalsPlainSQL() async throws {
        let configuration = bundledConfiguration
        let events = EventSeeder.journeys(configuration: configuration, personsPerFunnel: 300, seed: 71, detours: true)
        // Half the detours arrive late, after a first run: they touch persons already stored.
        let late = events.enumerated().filter { $0.element.messageId.contains("-detour-") && $0.offset % 2 == 0 }.map(\.offset)
        let lateSet = Set(late)
        let now = Timestamps.microseconds(Date())
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        var job = ProjectionJob(configuration: configuration, showProgress: false)
        job.options.eventsPerPartition = 500
        let configured = job
        try await pool.withConnection { c in
            try EventSeeder.insert(c, events.enumerated().filter { !lateSet.contains($0.offset) }.map(\.element))
            _ = try configured.run(c, mode: .incremental, now: now)
            try EventSeeder.insert(c, late.map { events[$0] })
            _ = try configured.run(c, mode: .incremental, now: now)
        }
        let incremental = try await pool.withConnection { try TableDump.dump($0) }
        let reports = try await pool.withConnection { c in try ReportQuery().results(c, configuration: configuration, now: now) }
        _ = try await pool.withConnection { c in try configured.run(c, mode: .rebuild, now: now) }
        let rebuilt = try await pool.withConnection { try TableDump.dump($0) }
        for table in ["funnel_person_diagnostics", "funnel_step_lingering", "funnel_dropoff_next", "funnel_driver_counts"] {
            #expect(incremental[table] == rebuilt[table], "\(table)")
            #expect((rebuilt[table]?.count ?? 0) > 20, "\(table)")
        }

        var checkedDrivers = 0
        for (funnel, result) in zip(configuration.funnels, reports) {
            let diagnostics = try #require(result.report.diagnostics)
            let expected = try await pool.withConnection { c in try Reference.diagnostics(c, funnel: funnel, now: now) }
            #expect(diagnostics.steps.count == funnel.requiredStepIndices.count)
            for (step, reference) in zip(diagnostics.steps, expected.steps) {
                let label = "\(funnel.name) step \(step.index)"
                #expect(step.dropped == reference.dropped, "\(label)")
                Self.close(step.lingeringSeconds.median, reference.lingering.median, label)
                Self.close(step.lingeringSeconds.p90, reference.lingering.p90, label)
                #expect(step.secondsFromPrevious?.persons == reference.gaps?.count, "\(label)")
                Self.close(step.secondsFromPrevious?.median, reference.gaps?.median, label)
                Self.close(step.secondsFromPrevious?.p90, reference.gaps?.p90, label)
                #expect(step.secondsFromPrevious?.histogram.map(\.persons) == reference.gaps.map { Reference.histogram($0.values, funnel) }, "\(label)")
                #expect(Dictionary(uniqueKeysWithValues: step.nextEvents.map { ($0.label, $0.persons) }) == reference.next, "\(label)")
                #expect(step.nextEvents.map(\.persons) == step.nextEvents.map(\.persons).sorted(by: >), "most common first")
            }
            #expect(diagnostics.drivers.count == expected.drivers.count, "\(funnel.name)")
            let byKey = Dictionary(uniqueKeysWithValues: expected.drivers.map { ($0.key, $0) })
            for driver in diagnostics.drivers {
                let key = "\(driver.from)>\(driver.to)|\(driver.kind.rawValue)|\(driver.dimension ?? "")|\(driver.value)"
                guard let reference = byKey[key] else {
                    Issue.record("\(funnel.name): \(key) not in the reference")
                    continue
                }
                #expect(driver.table == reference.table, "\(funnel.name) \(key)")
                let ratio = reference.oddsRatio
                Self.close(driver.oddsRatio, ratio.value, key, relative: 1e-12)
                Self.close(driver.ci95.lower, ratio.low, key, relative: 1e-12)
                Self.close(driver.ci95.upper, ratio.high, key, relative: 1e-12)
                Self.close(driver.pValue, reference.p, key, relative: 1e-6)
                Self.close(driver.qValue, reference.q, key, relative: 1e-6)
                checkedDrivers += 1
            }
            #expect(diagnostics.drivers.map(\.pValue) == diagnostics.drivers.map(\.pValue).sorted(), "most significant first")
        }
        #expect(checkedDrivers > 50)
        #expect(reports.contains { $0.report.diagnostics?.drivers.contains { $0.kind == .event && $0.qValue < 0.05 } == true })
        await pool.close()
        try await db.drop()
    }

    static func close(_ a: Double?, _ b: Double?, _ label: String, relative: Double = 1e-9) {
        switch (a, b) {
        case (nil, nil): return
        case let (a?, b?): #expect(abs(a - b) <= relative * max(1, abs(b)), "\(label): \(a) vs \(b)")
        default: Issue.record("\(label): \(String(describing: a)) vs \(String(describing: b))")
        }
    }
}

/// The definitions of docs/funnels.md, in SQL over the analyst's views, one funnel at a time.
enum Reference {
    struct Spread {
        var values: [Double]
        var count: Int { values.count }
        var median: Double?
        var p90: Double?
    }

    struct Step {
        var gaps: Spread?
        var dropped = 0
        var lingering = Spread(values: [])
        var next: [String: Int] = [:]
    }

    struct Driver {
        var key: String
        var table: TwoByTwo
        var p = 1.0
        var q = 1.0
        var oddsRatio: (value: Double, low: Double, high: Double) {
            let k = min(table.a, table.b, table.c, table.d) == 0 ? 0.5 : 0
            let a = Double(table.a) + k, b = Double(table.b) + k, c = Double(table.c) + k, d = Double(table.d) + k
            let ratio = a * d / (b * c)
            let se = (1 / a + 1 / b + 1 / c + 1 / d).squareRoot()
            return (ratio, ratio * exp(-1.959963984540054 * se), ratio * exp(1.959963984540054 * se))
        }
    }

    /// At the run's clock `now`: a person counts in the drivers once their chain's window has closed at it.
    static func diagnostics(_ c: Connection, funnel: Funnel, now: Int64) throws -> (steps: [Step], drivers: [Driver]) {
        let required = funnel.requiredStepIndices.map { $0 + 1 }
        let stepLabels = Array(Set(funnel.steps.flatMap { $0.matchers.map(\.name) }))
        let window = Double(funnel.windowSeconds)
        var steps: [Step] = []
        var drivers: [Driver] = []
        for (position, index) in required.enumerated() {
            let k = position + 1
            var step = Step()
            if k > 1 {
                let rows = try c.query(
                    """
                    SELECT extract(epoch FROM step_times[$2::int] - step_times[$3::int])::float8 AS s FROM analytics.funnel_persons
                    WHERE funnel = $1 AND NOT excluded AND step_times[$2::int] IS NOT NULL AND step_times[$3::int] IS NOT NULL
                    """, [.text(funnel.name), .int(Int64(index)), .int(Int64(required[position - 1]))]
                ).rows.map { try $0.decode(Double.self, at: 0) }
                step.gaps = try spread(c, rows)
            }
            if k < required.count {
                // Dropped at k: lingering to the last event in the window, and the first other label after t_k.
                let dropped = try c.query(
                    """
                    WITH d AS (
                        SELECT person_id, step_times[$2::int] AS tk, step_times[$3::int] + make_interval(secs => $4) AS wend
                        FROM analytics.funnel_persons
                        WHERE funnel = $1 AND level = $5::int AND NOT completed AND NOT in_progress AND NOT excluded
                    ), ev AS (
                        SELECT d.person_id, d.tk, e."timestamp" AS ts, COALESCE(e.event, e.type) AS label
                        FROM d JOIN analytics.events e ON e.app = $6 AND e.person_id = d.person_id
                        WHERE e."timestamp" >= d.tk AND e."timestamp" <= d.wend
                    ), own AS (
                        SELECT person_id, min(label) AS label FROM ev WHERE ts = tk AND label = ANY($7) GROUP BY person_id
                    )
                    SELECT d.person_id,
                           extract(epoch FROM (SELECT max(ts) FROM ev WHERE ev.person_id = d.person_id) - d.tk)::float8,
                           (SELECT ev.label FROM ev LEFT JOIN own ON own.person_id = ev.person_id
                            WHERE ev.person_id = d.person_id AND ev.ts > d.tk AND ev.label IS DISTINCT FROM own.label
                            ORDER BY ev.ts, ev.label LIMIT 1)
                    FROM d
                    """,
                    [.text(funnel.name), .int(Int64(index)), .int(Int64(required[0])), .double(window), .int(Int64(k)),
                     .text(funnel.app), .textArray(funnel.steps[index - 1].matchers.map(\.name))]
                ).rows
                step.dropped = dropped.count
                step.lingering = try spread(c, try dropped.map { try $0.decode(Double.self, at: 1) })
                for row in dropped { step.next[try row.decode(String?.self, at: 2) ?? DropOffFacts.noFurtherEvents, default: 0] += 1 }

                // Transition k -> k+1: totals, breakdown values, event labels.
                let parameters: [PostgresValue] = [.text(funnel.name), .int(Int64(k))]
                // The window's end is a number of the test's own, not input.
                let closed = "step_times[\(required[0])] + make_interval(secs => \(window)) <= to_timestamp(\(Double(now) / 1_000_000))"
                let eligible = "funnel = $1 AND level >= $2::int AND NOT in_progress AND NOT excluded AND \(closed)"
                guard let totals = try c.query(
                    "SELECT count(*) FILTER (WHERE level > $2::int), count(*) FILTER (WHERE level = $2::int) FROM analytics.funnel_persons WHERE \(eligible)",
                    parameters).first else { continue }
                let converted = try totals.decode(Int.self, at: 0), droppedTotal = try totals.decode(Int.self, at: 1)
                var candidates: [(String, Int, Int)] = []
                for row in try c.query(
                    """
                    SELECT b.key || '|' || b.value, count(*) FILTER (WHERE level > $2::int), count(*) FILTER (WHERE level = $2::int)
                    FROM analytics.funnel_persons, jsonb_each_text(breakdown) b WHERE \(eligible) GROUP BY 1
                    """, parameters).rows {
                    candidates.append(("breakdown|" + (try row.decode(String.self, at: 0)), try row.decode(Int.self, at: 1), try row.decode(Int.self, at: 2)))
                }
                for row in try c.query(
                    """
                    WITH p AS (
                        SELECT person_id, level, step_times[$3::int] AS tk, step_times[$4::int] AS tnext,
                               step_times[$5::int] + make_interval(secs => $6) AS wend
                        FROM analytics.funnel_persons WHERE \(eligible)
                    ), had AS (
                        SELECT DISTINCT p.person_id, p.level > $2::int AS converted, COALESCE(e.event, e.type) AS label
                        FROM p JOIN analytics.events e ON e.app = $7 AND e.person_id = p.person_id
                        WHERE e."timestamp" > p.tk
                          AND (CASE WHEN p.level > $2::int THEN e."timestamp" < p.tnext ELSE e."timestamp" <= p.wend END)
                          AND NOT (COALESCE(e.event, e.type) = ANY($8))
                    )
                    SELECT label, count(*) FILTER (WHERE converted), count(*) FILTER (WHERE NOT converted) FROM had GROUP BY label
                    """,
                    parameters + [.int(Int64(index)), .int(Int64(required[position + 1])), .int(Int64(required[0])), .double(window),
                                  .text(funnel.app), .textArray(stepLabels)]
                ).rows {
                    candidates.append(("event||" + (try row.decode(String.self, at: 0)), try row.decode(Int.self, at: 1), try row.decode(Int.self, at: 2)))
                }
                for (key, a, b) in candidates where a + b >= funnel.minSupport {
                    drivers.append(Driver(
                        key: "\(index)>\(required[position + 1])|\(key)",
                        table: TwoByTwo(a: a, b: b, c: converted - a, d: droppedTotal - b)))
                }
            }
            steps.append(step)
        }
        for i in drivers.indices { drivers[i].p = fisher(drivers[i].table) }
        // q_i = min over every p_j ≥ p_i of m·p_j / rank(j), at most 1.
        let sorted = drivers.map(\.p).sorted()
        for i in drivers.indices {
            var q = 1.0
            for (rank, p) in sorted.enumerated() where p >= drivers[i].p { q = min(q, p * Double(sorted.count) / Double(rank + 1)) }
            drivers[i].q = q
        }
        return (steps, drivers)
    }

    /// Percentiles by PostgreSQL's own `percentile_cont`.
    static func spread(_ c: Connection, _ values: [Double]) throws -> Spread {
        guard !values.isEmpty, let row = try c.query(
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY v), percentile_cont(0.9) WITHIN GROUP (ORDER BY v) FROM unnest($1::float8[]) v",
            [.textArray(values.map { String($0) })]).first
        else { return Spread(values: values) }
        return Spread(values: values, median: try row.decode(Double.self, at: 0), p90: try row.decode(Double.self, at: 1))
    }

    /// Persons per bin of the documented histogram edges, counted one by one.
    static func histogram(_ values: [Double], _ funnel: Funnel) -> [Int] {
        let window = Double(funnel.windowSeconds)
        let edges = DropOffDiagnostics.binEdges.filter { $0 < window } + [window]
        return (0...edges.count - 1).map { i in
            values.count { $0 >= edges[i] && (i + 1 == edges.count || $0 < edges[i + 1]) }
        }
    }

    /// Two-sided Fisher: every table with the margins no more likely than this one, from log-gamma.
    static func fisher(_ t: TwoByTwo) -> Double {
        let rows = t.a + t.b, columns = t.a + t.c, n = t.a + t.b + t.c + t.d
        func logChoose(_ n: Int, _ k: Int) -> Double { lgamma(Double(n + 1)) - lgamma(Double(k + 1)) - lgamma(Double(n - k + 1)) }
        func logP(_ x: Int) -> Double { logChoose(columns, x) + logChoose(n - columns, rows - x) - logChoose(n, rows) }
        let observed = logP(t.a)
        var sum = 0.0
        for x in max(0, rows + columns - n)...min(rows, columns) where logP(x) <= observed + 1e-7 { sum += exp(logP(x)) }
        return min(1, sum)
    }
}
