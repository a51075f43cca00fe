import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection
import Simulation
import TestSupport
import Testing

/// A regression planted in the newest app version of simulated traffic is
/// what the nightly report alerts on, with its step, kind and direction; the
/// better OTP of that version (the older one fails Android's codes) is an
/// improvement, not an alert; and every p- and q-value equals a second
/// computation from the stored persons' rows.
@Suite struct RegressionStoryTests {
    @Test("yoked 2.4.0 losing 6 points at profile_created is the version regression; p and q equal a computation from funnel_persons")
    func plantedRegression() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let now = Date()
        let events = SimulatedHistory.events(
            count: 80_000, from: 42, seed: 411, apps: ["yoked"],
            plants: [PlantedRegression(app: "yoked", version: "2.4.0", step: "profile_created", points: 6)], now: now)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        await pool.close()
        let configuration = bundledConfiguration
        let funnel = try #require(configuration.funnel(named: "yoked_onboarding"))
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        let clock = Timestamps.microseconds(now)
        let run = try await NightlyRun.run(job, mode: .rebuild, query: ReportQuery(), databaseURL: db.url, now: clock)
        let report = try #require(run.results.first { $0.report.funnel == funnel.name }?.report)
        let found = report.regressions
        for change in found.regressions + found.improvements {
            print(String(
                format: "regression story: %@ %@ %@ %@: %@ %.4f (%d) → %@ %.4f (%d), p %.2e, q %.2e", found.regressions.contains(change) ? "REGRESSION" : "improvement",
                change.kind.rawValue, change.metric.rawValue, change.step ?? "", change.baseline.label, change.baseline.value ?? .nan,
                change.baseline.persons, change.recent.label, change.recent.value ?? .nan, change.recent.persons, change.pValue, change.qValue))
        }
        let regression = try #require(found.regressions.first)
        #expect(found.regressions.count == 1)
        #expect(regression.kind == .version && regression.metric == .conversionFromPrevious && regression.step == "profile_created")
        #expect(regression.baseline.label == "2.3.0" && regression.recent.label == "2.4.0")
        #expect(regression.difference < -0.03 && regression.difference > -0.09)
        // 2.4.0 does not have 2.3.0's Android code-entry fault: better at OTP, reported, not alerted.
        #expect(found.improvements.contains { $0.kind == .version && $0.step == "otp_verified" })
        #expect(!found.regressions.contains { $0.kind == .period })

        // The second computation: from each stored person's row, not from the day tallies.
        let newest = CohortCalendar.newestClosedDay(now: clock, windowMicroseconds: funnel.windowMicroseconds, in: .gmt)
        let check = try await db.pool(maxConnections: 1).withConnection { c in
            try PersonRows.load(c, funnel: funnel.name, newestClosedDay: newest)
        }
        let recentFirst = newest - 6, baselineFirst = recentFirst - 28
        let sides: [(MetricChange.Kind, PersonRows.Side, PersonRows.Side)] = [
            (.period, check.side { $0.day >= baselineFirst && $0.day < recentFirst }, check.side { $0.day >= recentFirst }),
            (.version, check.side { $0.version == "2.3.0" }, check.side { $0.version == "2.4.0" }),
        ]
        var reference: [String: Double] = [:]
        for (kind, before, after) in sides {
            for level in 2...funnel.steps.count {
                reference["\(kind) \(funnel.steps[level - 1].name)"] = RegressionReference.zTest(
                    after.reached[level - 1], after.reached[level - 2], before.reached[level - 1], before.reached[level - 2])
            }
            reference["\(kind) completion"] = RegressionReference.zTest(after.completed, after.started, before.completed, before.started)
            reference["\(kind) time"] = RegressionReference.mannWhitney(after.seconds, before.seconds)
        }
        #expect(found.tested.count == reference.count)
        let q = RegressionReference.benjaminiHochberg(reference)
        for change in found.tested {
            let key = "\(change.kind) \(change.step ?? (change.metric == .completionRate ? "completion" : "time"))"
            let p = try #require(reference[key], "\(key)")
            #expect(abs(change.pValue - p) <= 1e-9 * max(1e-300, p) + 1e-15, "\(key): p \(change.pValue) vs \(p)")
            #expect(abs(change.qValue - (q[key] ?? -1)) <= 1e-9 * max(1e-300, q[key] ?? 0) + 1e-15, "\(key): q \(change.qValue) vs \(q[key] ?? -1)")
        }

        // What the report found is what analysts read.
        let rows = try await db.pool(maxConnections: 1).withConnection { c in
            try c.query("SELECT direction, kind, metric, step, baseline_label, recent_label, q_value FROM analytics.funnel_regressions WHERE funnel = 'yoked_onboarding' ORDER BY direction DESC, q_value").rows
                .map { row in (0..<6).map { row.text(at: $0) ?? "" } }
        }
        #expect(rows.first == ["regression", "version", "conversion_from_previous", "profile_created", "2.3.0", "2.4.0"])
        #expect(rows.count == found.regressions.count + found.improvements.count)
        try await db.drop()
    }
}

/// The persons of one funnel as stored, for the second computation.
struct PersonRows {
    struct Person {
        var day: Int64
        var version: String?
        var level: Int
        var completed: Bool
        var seconds: Double?
    }

    struct Side {
        var started = 0
        var completed = 0
        /// By level: persons whose level reaches it (index 0: level ≥ 1).
        var reached: [Int]
        var seconds: [Double] = []
    }

    var persons: [Person]
    var steps: Int

    static func load(_ c: Connection, funnel: String, newestClosedDay: Int64) throws -> PersonRows {
        var persons: [Person] = []
        var steps = 0
        try c.forEachRow(
            """
            SELECT cohort_day::text, breakdown->>'context.app.version', level, completed, seconds_to_complete, cardinality(step_times_us)
            FROM funnel_persons WHERE funnel = $1 AND NOT excluded AND level > 0
            """, [.text(funnel)]
        ) { row in
            guard let day = CohortCalendar.dayNumber(ofText: try row.decode(String.self, at: 0)), day <= newestClosedDay else { return }
            steps = try row.decode(Int.self, at: 5)
            persons.append(Person(
                day: day, version: try row.decode(String?.self, at: 1), level: try row.decode(Int.self, at: 2),
                completed: try row.decode(Bool.self, at: 3), seconds: try row.decode(Double?.self, at: 4)))
        }
        return PersonRows(persons: persons, steps: steps)
    }

    func side(_ include: (Person) -> Bool) -> Side {
        var side = Side(reached: Array(repeating: 0, count: steps))
        for person in persons where include(person) {
            side.started += 1
            for level in 0..<min(person.level, steps) { side.reached[level] += 1 }
            if person.completed {
                side.completed += 1
                if let seconds = person.seconds { side.seconds.append(seconds) }
            }
        }
        return side
    }
}

/// The tests of docs/funnels.md, "Regressions and alerts", written out again, the plain way.
enum RegressionReference {
    /// Pooled two-proportion z-test, two-sided.
    static func zTest(_ s1: Int, _ n1: Int, _ s2: Int, _ n2: Int) -> Double {
        let p1 = Double(s1) / Double(n1), p2 = Double(s2) / Double(n2)
        let pooled = Double(s1 + s2) / Double(n1 + n2)
        let se = (pooled * (1 - pooled) * (1 / Double(n1) + 1 / Double(n2))).squareRoot()
        guard se > 0 else { return 1 }
        return erfc(abs((p1 - p2) / se) / 2.0.squareRoot())
    }

    /// Mann–Whitney U counted pair by pair; variance with the tie term; no continuity correction.
    static func mannWhitney(_ x: [Double], _ y: [Double]) -> Double {
        var u = 0.0
        let sortedY = y.sorted()
        for value in x {
            // Pairs with y below value, plus half the ties: two binary searches instead of a loop over y.
            let below = sortedY.partitioningIndex { $0 >= value }, notAbove = sortedY.partitioningIndex { $0 > value }
            u += Double(below) + Double(notAbove - below) / 2
        }
        var counts: [Double: Double] = [:]
        for value in x + y { counts[value, default: 0] += 1 }
        let n1 = Double(x.count), n2 = Double(y.count), n = n1 + n2
        let ties = counts.values.reduce(0) { $0 + $1 * $1 * $1 - $1 }
        let sigma = (n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))).squareRoot()
        return erfc(abs(u - n1 * n2 / 2) / sigma / 2.0.squareRoot())
    }

    /// q = min over the larger p's of p·m/rank, capped at 1.
    static func benjaminiHochberg(_ p: [String: Double]) -> [String: Double] {
        let ranked = p.sorted { $0.value < $1.value }
        var q: [String: Double] = [:]
        var running = 1.0
        for (rank, entry) in ranked.enumerated().reversed() {
            running = min(running, entry.value * Double(ranked.count) / Double(rank + 1))
            q[entry.key] = running
        }
        return q
    }
}

extension Array {
    /// The first index whose element satisfies `belongs` (which must hold for a suffix).
    func partitioningIndex(where belongs: (Element) -> Bool) -> Int {
        var low = 0, high = count
        while low < high {
            let mid = (low + high) / 2
            if belongs(self[mid]) { high = mid } else { low = mid + 1 }
        }
        return low
    }
}
