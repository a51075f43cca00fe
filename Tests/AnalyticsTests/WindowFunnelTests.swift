import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Migrations
import TestSupport
import Testing

/// `analytics.window_funnel`, the SQL aggregate, is a second implementation
/// of the engine's plain funnel: on random histories (ties, repeated steps,
/// events matching several steps, `where` filters) its level equals
/// `FunnelEvaluator`'s, and the analyst can call it. It runs on the C
/// extension onramp_funnel where the server has it (scripts/test installs
/// it) and on PL/pgSQL where not: the two, and the engine, agree.
// One test at a time: each keeps a PostgreSQL backend busy for seconds, and
// the whole suite shares two cores.
@Suite("analytics.window_funnel against the engine", .serialized)
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

    // MARK: - The native aggregate, the fallback and the engine

    /// The PL/pgSQL aggregates migrations 016, 017 and 028 made, under
    /// session-local names: what `analytics.window_funnel` is on a server
    /// without the extension.
    static let fallbackAggregates = """
        CREATE AGGREGATE pg_temp.fallback_window_funnel(interval, timestamptz, VARIADIC boolean[]) (
            SFUNC = analytics.window_funnel_add, STYPE = bigint[], FINALFUNC = analytics.window_funnel_level);
        CREATE AGGREGATE pg_temp.fallback_masks(interval, timestamptz, bigint, integer) (
            SFUNC = analytics.window_funnel_add_mask, STYPE = bigint[], FINALFUNC = analytics.window_funnel_level);
        CREATE AGGREGATE pg_temp.fallback_chain_masks(interval, timestamptz, bigint, integer) (
            SFUNC = analytics.window_funnel_add_mask, STYPE = bigint[], FINALFUNC = analytics.window_funnel_chain)
        """

    static let nativeMissing = "the extension onramp_funnel is not installed: make -C extensions/onramp_funnel install (scripts/test does)"

    /// A random funnel: mostly a few steps over few names (deep levels,
    /// ties), sometimes 63 steps over more names with long histories.
    static func randomLongFunnel(_ rng: inout SplitMix) -> (Funnel, names: [String], events: Int, seconds: Int64) {
        let long = rng.next() % 6 == 0
        let names = long ? ["a", "b", "c", "d", "e", "f"] : names
        let count = long ? 63 : 1 + Int(rng.next() % 8)
        let steps = (0..<count).map { index in
            let conditions: [String: String] = rng.next() % 6 == 0 ? ["properties.x": String(rng.next() % 2)] : [:]
            // Long funnels cycle through the names, so long histories get far.
            let name = long && rng.next() % 4 != 0 ? names[index % names.count] : names[Int(rng.next() % UInt64(names.count))]
            return FunnelStep(.event(name, where: conditions))
        }
        let window: Int64 = long ? [0, 20, 60, 400][Int(rng.next() % 4)] : [0, 1, 2, 4, 6, 11][Int(rng.next() % 6)]
        return (Funnel(name: "random", app: "x", windowSeconds: window, steps: steps, breakdowns: []), names, long ? 160 : 12, long ? 120 : 12)
    }

    @Test("native, fallback and engine agree on random histories: every argument, ties, 63 steps, NULLs, empty groups", arguments: [UInt64(71), 72, 73])
    func nativeFallbackEngine(seed: UInt64) async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let native = try await pool.withConnection { try FunnelAggregates.transitionFunction($0, of: "analytics.window_funnel(interval, timestamptz, boolean[])") }
        #expect(native == "window_funnel_native_add", "\(Self.nativeMissing)")
        try await pool.withConnection { try $0.executeScript(Self.fallbackAggregates) }
        var rng = SplitMix(seed: seed)
        var compared = 0, levels: [Int: Int] = [:], longFunnels = 0
        for _ in 0..<30 {
            let (funnel, names, maxEvents, span) = Self.randomLongFunnel(&rng)
            if funnel.steps.count == 63 { longFunnels += 1 }
            var persons: [Int64] = [], times: [Int64] = [], masks: [Int64] = [], nullSteps: [Int64] = [], timeless: [Int64] = [], kept: [Int64] = []
            var expected: [Int64: PersonOutcome] = [:]
            for person in Int64(0)..<100 {
                // Some persons' rows all fall outside the aggregate's FILTER: an empty group.
                let empty = rng.next() % 15 == 0
                var engineEvents: [FunnelEvent] = []
                for index in 0..<(1 + Int(rng.next() % UInt64(maxEvents))) {
                    var attributes: [String: String] = [:]
                    if rng.next() % 4 != 0 { attributes["properties.x"] = String(rng.next() % 2) }
                    // Microsecond times, many of them shared.
                    let time = Int64(rng.next() % UInt64(span)) * 1_000_000 + (rng.next() % 3 == 0 ? Int64(rng.next() % 3) : 0)
                    let event = FunnelEvent(
                        messageId: "\(person)-\(index)", kind: .track, name: names[Int(rng.next() % UInt64(names.count))],
                        timestamp: time, attributes: attributes)
                    var mask: Int64 = 0
                    for (step, matcher) in funnel.steps.enumerated() where matcher.matches(event) { mask |= 1 << step }
                    // A NULL step where the event does not match it: NULL counts as not matching.
                    let nulls = rng.next() % 5 == 0 ? Int64(bitPattern: rng.next()) & ~mask & ((1 << funnel.steps.count) &- 1) : 0
                    let noTime = rng.next() % 20 == 0
                    persons.append(person); times.append(time); masks.append(mask); nullSteps.append(nulls)
                    timeless.append(noTime ? 1 : 0); kept.append(empty ? 0 : 1)
                    if !noTime && !empty { engineEvents.append(event) }
                }
                expected[person] = FunnelEvaluator.evaluate(events: engineEvents, funnel: funnel, now: .max)
            }
            let rows = try await pool.query(
                """
                WITH e AS (
                    SELECT person, CASE WHEN none = 0 THEN timestamptz 'epoch' + t * interval '1 microsecond' END AS ts, m, keep = 1 AS keep,
                           ARRAY(SELECT CASE WHEN (nulls >> i) & 1 = 1 THEN NULL ELSE (m >> i) & 1 = 1 END
                                 FROM generate_series(0, $2::int - 1) AS i ORDER BY i) AS steps
                    FROM unnest($3::int8[], $4::int8[], $5::int8[], $6::int8[], $7::int8[], $8::int8[]) AS x(person, t, m, nulls, none, keep)
                ), w AS (SELECT $1::int8 * interval '1 second' AS win)
                SELECT person,
                       analytics.window_funnel(win, ts, VARIADIC steps) FILTER (WHERE keep),
                       pg_temp.fallback_window_funnel(win, ts, VARIADIC steps) FILTER (WHERE keep),
                       analytics.window_funnel_masks(win, ts, m, $2::integer) FILTER (WHERE keep),
                       pg_temp.fallback_masks(win, ts, m, $2::integer) FILTER (WHERE keep),
                       analytics.window_funnel_chain_masks(win, ts, m, $2::integer) FILTER (WHERE keep)::text,
                       pg_temp.fallback_chain_masks(win, ts, m, $2::integer) FILTER (WHERE keep)::text
                FROM e, w GROUP BY person ORDER BY person
                """,
                [.int(funnel.windowSeconds), .int(Int64(funnel.steps.count)), .intArray(persons), .intArray(times), .intArray(masks),
                 .intArray(nullSteps), .intArray(timeless), .intArray(kept)])
            #expect(rows.rows.count == 100)
            for row in rows.rows {
                let person = try row.decode(Int64.self, at: 0)
                let outcome = try #require(expected[person])
                let level = try row.decode(Int.self, at: 1)
                #expect(level == outcome.level, "person \(person) of \(funnel)")
                #expect(try row.decode(Int.self, at: 2) == level, "fallback, person \(person) of \(funnel)")
                #expect(try row.decode(Int.self, at: 3) == level, "native masks, person \(person)")
                #expect(try row.decode(Int.self, at: 4) == level, "fallback masks, person \(person)")
                let chain = try row.decode(String.self, at: 5)
                #expect(chain == (try row.decode(String.self, at: 6)), "chains, person \(person) of \(funnel)")
                let engineChain = outcome.level == 0
                    ? "{0,NULL,NULL}"
                    : "{\(outcome.level),\(outcome.chainStartTime ?? -1),\(outcome.stepTimes[outcome.level - 1] ?? -1)}"
                #expect(chain == engineChain, "engine's chain, person \(person) of \(funnel)")
                levels[level, default: 0] += 1
                compared += 1
            }
        }
        #expect(compared == 30 * 100)
        #expect((levels[0] ?? 0) > 20 && (levels[3] ?? 0) > 50 && levels.keys.contains { $0 > 10 }, "levels seen: \(levels)")
        #expect(longFunnels >= 2, "63-step funnels: \(longFunnels)")
        await pool.close()
        try await db.drop()
    }

    @Test("bad arguments get the fallback's errors from the native aggregate")
    func nativeErrors() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        try await pool.withConnection { try $0.executeScript(Self.fallbackAggregates) }
        let cases: [(arguments: String, message: String)] = [
            ("interval '-1 hour', ts, true", "window_funnel: the window must be an interval of 0 or more (got -01:00:00)"),
            ("NULL::interval, ts, true", "window_funnel: the window must be an interval of 0 or more (got <NULL>)"),
            ("interval '1 hour', ts, VARIADIC array_fill(true, ARRAY[64])", "window_funnel: at most 63 steps (got 64)"),
        ]
        for (arguments, message) in cases {
            for aggregate in ["analytics.window_funnel", "pg_temp.fallback_window_funnel"] {
                let error = await #expect(throws: PostgresError.self) {
                    try await pool.query("SELECT \(aggregate)(\(arguments)) FROM (VALUES (now())) AS v(ts)")
                }
                #expect(error?.message == message, "\(aggregate)(\(arguments)): \(String(describing: error))")
                #expect(error?.sqlState == "22023")
            }
        }
        // The masks' form, which the fallback does not check, is checked natively.
        for (arguments, message) in [
            ("interval '-1 hour', now(), 1, 2", "window_funnel: the window must be an interval of 0 or more (got -01:00:00)"),
            ("interval '1 hour', now(), 1, 64", "window_funnel: at most 63 steps (got 64)"),
        ] {
            let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT analytics.window_funnel_masks(\(arguments))") }
            #expect(error?.message == message, "\(String(describing: error))")
        }
        // The support functions run only inside the aggregates, for the owner as for an analyst.
        let outside = await #expect(throws: PostgresError.self) { try await pool.query("SELECT analytics.window_funnel_native_level('\\x00'::bytea)") }
        #expect(outside?.message == "window_funnel: its support functions run only inside its aggregates", "\(String(describing: outside))")
        let analyst = ConnectionPool(url: try db.url(as: "onramp_analyst"), maxConnections: 1)
        let denied = await #expect(throws: PostgresError.self) { try await analyst.query("SELECT analytics.window_funnel_native_level('\\x00'::bytea)") }
        #expect(denied?.message == "window_funnel: its support functions run only inside its aggregates", "\(String(describing: denied))")
        #expect(try await analyst.query("SELECT analytics.window_funnel(interval '1 hour', now(), true)").scalar(Int.self) == 1)
        await analyst.close()
        // Empty input and a group of timeless rows: level 0, as the fallback.
        let empty = try await pool.query(
            """
            SELECT analytics.window_funnel(interval '1 hour', ts, true), pg_temp.fallback_window_funnel(interval '1 hour', ts, true),
                   analytics.window_funnel_chain_masks(interval '1 hour', ts, 1, 1)::text, pg_temp.fallback_chain_masks(interval '1 hour', ts, 1, 1)::text
            FROM (VALUES (NULL::timestamptz)) AS v(ts)
            """)
        #expect(try empty.rows[0].decode(Int.self, at: 0) == 0 && empty.rows[0].decode(Int.self, at: 1) == 0)
        #expect(try empty.rows[0].decode(String.self, at: 2) == "{0,NULL,NULL}" && empty.rows[0].decode(String.self, at: 3) == "{0,NULL,NULL}")
        await pool.close()
        try await db.drop()
    }

    @Test("migrate on a server without the extension: the fallback, and a warning naming what is missing; with it: native, idempotent, grants kept")
    func migrateChooses() async throws {
        let db = try await TestDatabase.create(migrated: false)
        var migrator = try Migrator(directory: try TestDatabase.migrationsDirectory)
        migrator.funnelExtension = "onramp_funnel_absent"
        let pool = db.pool(maxConnections: 1)
        let absent = migrator
        let fallback = try await pool.withConnection { try absent.migrate($0) }
        guard case .fallback(let reason)? = fallback.funnelAggregates else {
            Issue.record("expected the fallback: \(String(describing: fallback.funnelAggregates))")
            return
        }
        #expect(reason.contains("onramp_funnel_absent") && reason.contains("postgresql-server-dev-15"), "\(reason)")
        let grants = "SELECT p.proname, string_agg(x.grantee::regrole::text, ' ' ORDER BY x.grantee::regrole::text) FROM pg_proc p, aclexplode(p.proacl) x "
            + "WHERE p.pronamespace = 'analytics'::regnamespace AND p.prokind = 'a' AND p.proname LIKE 'window_funnel%' GROUP BY 1 ORDER BY 1"
        let before = try await pool.query(grants).rows.map { try "\($0.decode(String.self, at: 0)) \($0.decode(String.self, at: 1))" }
        #expect(try await pool.withConnection { try FunnelAggregates.transitionFunction($0, of: "analytics.window_funnel(interval, timestamptz, boolean[])") } == "window_funnel_add")
        // The extension installed later: the next migrate switches, and the one after changes nothing.
        migrator.funnelExtension = FunnelAggregates.extensionName
        let present = migrator
        for _ in 0..<2 {
            let outcome = try await pool.withConnection { try present.migrate($0) }
            #expect(outcome.funnelAggregates == .native(version: "1.0"), "\(Self.nativeMissing)")
        }
        let after = try await pool.query(grants).rows.map { try "\($0.decode(String.self, at: 0)) \($0.decode(String.self, at: 1))" }
        #expect(before == after && before.count == 3, "\(before) \(after)")
        for aggregate in ["window_funnel(interval, timestamptz, boolean[])", "window_funnel_masks(interval, timestamptz, bigint, integer)",
                          "window_funnel_chain_masks(interval, timestamptz, bigint, integer)"] {
            #expect(try await pool.withConnection { try FunnelAggregates.transitionFunction($0, of: "analytics." + aggregate) }.hasPrefix("window_funnel_native_add"))
        }
        await pool.close()
        try await db.drop()
    }

    /// A backend's private resident memory in KB (RssAnon: its heap, not the
    /// shared buffers it touched).
    static func privateKB(pid: Int) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") })
        else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// Runs `sql` on `pool` while sampling backend `pid`'s private memory; its peak in KB.
    static func peakWhile(_ pool: ConnectionPool, pid: Int, _ sql: String) async throws -> (QueryResult, Int) {
        let sampler = Task {
            var peak = 0
            while !Task.isCancelled {
                peak = max(peak, privateKB(pid: pid))
                try? await Task.sleep(for: .milliseconds(5))
            }
            return peak
        }
        let result = try await pool.query(sql)
        sampler.cancel()
        return (result, max(await sampler.value, privateKB(pid: pid)))
    }

    @Test("inside the server: no growth across 1,000,000 groups, a cancel or statement_timeout stops a long sweep within a second, no backend crash")
    func safeInsideTheServer() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let admin = db.pool(maxConnections: 1)
        let started = try await admin.query("SELECT pg_postmaster_start_time()::text").scalar(String.self)
        // Memory: the backend's peak after 10,000 groups and after 1,000,000, by hash and by sort.
        // One backend (no parallel workers), the server's default work_mem (a
        // larger one would hold the 1,000,000 generated rows in memory), and no
        // JIT (LLVM's own 200 MB, loaded on the first query, would hide the rest).
        try await pool.query("SET max_parallel_workers_per_gather = 0")
        try await pool.query("SET work_mem = '4MB'")
        try await pool.query("SET jit = off")
        let pid = try await pool.query("SELECT pg_backend_pid()").scalar(Int.self)
        func groups(_ count: Int) -> String {
            """
            SELECT count(*), sum(level) FROM (
                SELECT g % \(count) AS person, analytics.window_funnel(interval '1 hour', timestamptz '2025-01-01' + (g % 7) * interval '1 minute',
                           g % 3 = 0, g % 3 = 1, g % 3 = 2) AS level
                FROM generate_series(1, 1000000) AS g GROUP BY 1) AS s
            """
        }
        var peaks: [String] = []
        for plan in ["SET enable_hashagg = on", "SET enable_hashagg = off"] {
            try await pool.query(plan)
            let (small, before) = try await Self.peakWhile(pool, pid: pid, groups(10_000))
            #expect(try small.rows[0].decode(Int.self, at: 0) == 10_000)
            let (large, after) = try await Self.peakWhile(pool, pid: pid, groups(1_000_000))
            #expect(try large.rows[0].decode(Int.self, at: 0) == 1_000_000)
            peaks.append("\(plan): \(before) KB at most over 10,000 groups, \(after) KB over 1,000,000")
            #expect(before > 0 && after < before + 32 * 1024, "\(peaks)")
        }
        // A sweep of a million events at 10,000 times, each matching all 63 steps: tens of seconds.
        let heavy = """
            SELECT analytics.window_funnel_masks(interval '1000 days', timestamptz 'epoch' + (g / 100) * interval '1 second',
                       x'7fffffffffffffff'::bigint, 63)
            FROM generate_series(1, 1000000) AS g
            """
        let connection = try Connection.connect(db.url)
        let canceller = try #require(connection.canceller())
        try connection.query("SET max_parallel_workers_per_gather = 0")
        let running = Task.detached { () -> (String?, ContinuousClock.Instant) in
            do {
                _ = try connection.query(heavy)
                return (nil, .now)
            } catch {
                return ((error as? PostgresError)?.sqlState, .now)
            }
        }
        try await Task.sleep(for: .seconds(1))
        let cancelled = ContinuousClock.now
        canceller.cancel()
        let (state, ended) = await running.value
        #expect(state == "57014", "the sweep was not cancelled: \(String(describing: state))")
        #expect(ended - cancelled < .seconds(1), "stopped \(ended - cancelled) after the cancel")
        try connection.query("SET statement_timeout = '1s'")
        let clock = ContinuousClock.now
        let timedOut = #expect(throws: PostgresError.self) { try connection.query(heavy) }
        #expect(timedOut?.sqlState == "57014")
        #expect(ContinuousClock.now - clock < .seconds(2), "statement_timeout 1 s stopped it after \(ContinuousClock.now - clock)")
        // A backend terminated mid-sweep takes no other down: the postmaster never restarted.
        try connection.query("SET statement_timeout = 0")
        let pid2 = try connection.query("SELECT pg_backend_pid()").scalar(Int.self)
        let terminated = Task.detached { () -> Bool in (try? connection.query(heavy)) == nil }
        try await Task.sleep(for: .seconds(1))
        #expect(try await admin.query("SELECT pg_terminate_backend($1::int)", [.int(Int64(pid2))]).scalar(Bool.self))
        #expect(await terminated.value)
        #expect(try await admin.query("SELECT pg_postmaster_start_time()::text").scalar(String.self) == started)
        #expect(try await pool.query("SELECT analytics.window_funnel(interval '1 hour', now(), true)").scalar(Int.self) == 1)
        await pool.close()
        await admin.close()
        try await db.drop()
    }
}
