import Foundation
import Funnels
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// `analytics.window_funnel`, the SQL aggregate, is a second implementation
/// of the engine's plain funnel: on random histories (ties, repeated steps,
/// events matching several steps, `where` filters) its level equals
/// `FunnelEvaluator`'s, and the analyst can call it.
@Suite("analytics.window_funnel against the engine")
struct WindowFunnelTests {
    static let names = ["a", "b", "c", "d"]

    static func randomFunnel(_ rng: inout SplitMix) -> Funnel {
        let steps = (0..<(1 + Int(rng.next() % 5))).map { _ in
            let conditions: [String: String] = rng.next() % 5 == 0 ? ["properties.x": String(rng.next() % 2)] : [:]
            return FunnelStep(.event(names[Int(rng.next() % 4)], where: conditions))
        }
        return Funnel(name: "random", app: "x", windowSeconds: [0, 2, 4, 6, 11][Int(rng.next() % 5)], steps: steps, breakdowns: [])
    }

    static func randomHistory(_ rng: inout SplitMix, person: Int) -> [FunnelEvent] {
        (0..<(1 + Int(rng.next() % 9))).map { index in
            var attributes: [String: String] = [:]
            if rng.next() % 4 != 0 { attributes["properties.x"] = String(rng.next() % 2) }
            return FunnelEvent(
                messageId: "\(person)-\(index)", kind: .track, name: names[Int(rng.next() % 4)],
                timestamp: Int64(rng.next() % 12) * 1_000_000, attributes: attributes)
        }
    }

    @Test("random histories: the SQL level equals the engine's", arguments: [UInt64(3), 4, 5])
    func sameLevels(seed: UInt64) async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        var rng = SplitMix(seed: seed)
        var seen: [Int: Int] = [:]
        for _ in 0..<40 {
            let funnel = Self.randomFunnel(&rng)
            var persons: [Int32] = [], times: [Int64] = [], masks: [Int64] = []
            var expected: [Int32: Int] = [:]
            for person in 0..<150 {
                let events = Self.randomHistory(&rng, person: person)
                expected[Int32(person)] = FunnelEvaluator.evaluate(events: events, funnel: funnel, now: .max).level
                for event in events {
                    var mask: Int64 = 0
                    for (index, step) in funnel.steps.enumerated() where step.matches(event) { mask |= 1 << index }
                    persons.append(Int32(person))
                    times.append(event.timestamp)
                    masks.append(mask)
                }
            }
            // Each event's steps as booleans, from its mask; its time from microseconds.
            let rows = try await pool.query(
                """
                SELECT person, analytics.window_funnel(make_interval(secs => $1::float8), to_timestamp(t / 1000000.0),
                           VARIADIC ARRAY(SELECT (m >> i::int) & 1 = 1 FROM generate_series(0, $2 - 1) AS i ORDER BY i))
                FROM unnest($3::int4[], $4::int8[], $5::int8[]) AS e(person, t, m)
                GROUP BY person
                """,
                [.int(funnel.windowSeconds), .int(Int64(funnel.steps.count)), .intArray(persons.map(Int64.init)), .intArray(times), .intArray(masks)])
            var levels: [Int32: Int] = [:]
            for row in rows.rows { levels[Int32(try row.decode(Int.self, at: 0))] = try row.decode(Int.self, at: 1) }
            #expect(levels == expected, "\(funnel)")
            for level in expected.values { seen[level, default: 0] += 1 }
        }
        #expect((seen[2] ?? 0) > 100 && (seen[3] ?? 0) > 10, "levels seen: \(seen)")
        await pool.close()
        try await db.drop()
    }

    @Test("the analyst calls it over analytics.events, and bad arguments are named")
    func analystCallsIt() async throws {
        let session = try await AnalystSession.make()
        let levels = try await session.analyst.query(
            """
            SELECT level, count(*)::int AS persons FROM (
                SELECT anonymous_id, analytics.window_funnel(interval '1 day', "timestamp",
                           event = 'onboarding_started', event = 'phone_entered', event = 'otp_verified') AS level
                FROM analytics.events WHERE app = 'yoked' GROUP BY anonymous_id) s
            GROUP BY level ORDER BY level
            """)
        #expect(!levels.rows.isEmpty)
        let error = await #expect(throws: PostgresError.self) {
            try await session.analyst.query(
                "SELECT analytics.window_funnel(interval '-1 hour', \"timestamp\", true) FROM analytics.events")
        }
        #expect(error?.message.contains("window_funnel: the window must be an interval of 0 or more") == true, "\(String(describing: error))")
        try await session.close()
    }
}
