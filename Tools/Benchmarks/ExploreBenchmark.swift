public import Foundation
import Funnels
import LibPQ
import Migrations
import LocalPostgres
public import Simulation

/// `onramp-bench explore` (BENCHMARKS.md, "Explore"): query-time funnels
/// from fresh `onramp funnel` processes over a generated history, against
/// the plain-SQL funnel and, when the `chdb` Python package is installed,
/// ClickHouse's `windowFunnel` (chDB) over the same events exported to Parquet.
public struct ExploreBenchmark: Sendable {
    public struct QueryRun: Sendable, Codable {
        public var name: String
        public var definition: String
        /// Fresh process, the store built: the first time this definition is asked.
        public var firstSeconds: Double
        /// Fresh processes again, caches warm (the answer kept by the first reused): the best of the repeats.
        public var repeatedSeconds: Double
        public var repeatedSamples: [Double]
        /// Fresh processes counting again (`--recount`), as after new events: the best of the repeats.
        public var recountSeconds: Double
        public var recountSamples: [Double]
        public var started: Int
        public var completed: Int
    }

    public struct Result: Sendable, Codable {
        public var events: Int
        public var appEvents: Int
        public var loadSeconds: Double
        /// The first query ever: the store read from the whole log.
        public var storeBuildSeconds: Double
        public var storeBytes: Int
        public var logBytes: Int
        public var queries: [QueryRun]
        /// The 12-step funnel in one SQL query (`SQLFunnel`).
        public var sqlSeconds: Double
        public var sqlStepPersons: [Int]
        /// chDB's `windowFunnel`, q1's steps and breakdown: first run (fresh process) and best of the repeats; nil without chdb.
        public var chdbFirstSeconds: Double?
        public var chdbBestSeconds: Double?
        public var chdbStepPersons: [Int]?
        public var chdbNote: String?
        /// The persons behind q1's numbers (docs/funnels.md, "The persons behind a number").
        public var persons: PersonsRun?
        /// q1 through the analysts' SQL aggregates.
        public var aggregates: AggregatesRun?
    }

    /// q1 as an analyst writes it in SQL (sql/examples/14_any_funnel_in_sql.sql):
    /// `analytics.window_funnel` grouped by person, against the same query
    /// counting rows in its place (reading the rows: the floor) and against
    /// the PL/pgSQL fallback; and `analytics.funnel_report`, whose masks'
    /// aggregate is native or the fallback. Best of the repeats; the
    /// fallbacks once (they are the slow ones).
    public struct AggregatesRun: Sendable, Codable {
        /// What `onramp migrate` left `analytics.window_funnel` on: its transition function.
        public var implementation: String
        public var floorSeconds: Double
        public var windowFunnelSeconds: Double
        public var fallbackSeconds: Double
        public var funnelReportSeconds: Double
        public var funnelReportFallbackSeconds: Double
        /// Persons reaching each step: the native aggregate, the fallback, funnel_report native and fallback.
        public var reached: [Int]
        public var fallbackReached: [Int]
        public var funnelReportReached: [Int]
        public var funnelReportFallbackReached: [Int]
    }

    /// q1's largest drop-off as persons and as paths, each against what it
    /// stands beside; the SQL function on the night's tables; peak RSS of
    /// lists of two sizes.
    public struct PersonsRun: Sendable, Codable {
        /// The step (the report's row) with the most drop-offs, and how many.
        public var step: Int
        public var dropped: Int
        /// `--persons dropped:STEP --recount`, CSV: the best of the repeats; q1's `--recount` of the same run beside it.
        public var listSeconds: Double
        public var recountSeconds: Double
        /// `--paths-after STEP --recount`, against q1 `--diagnostics --recount`.
        public var pathsSeconds: Double
        public var diagnosticsRecountSeconds: Double
        /// `analytics.funnel_step_persons` for the configured yoked funnel's same cell, best of the repeats.
        public var sqlSeconds: Double
        public var sqlPersons: Int
        /// Peak RSS (KB) of `--persons … --format csv`: the largest cell (reached:1) and the smallest non-empty drop-off, with their lengths.
        public var largeList: Int
        public var largeRSS: Int
        public var smallList: Int
        public var smallRSS: Int
        /// The same two lists from the night's tables (`onramp report --persons`).
        public var storedLargeRSS: Int
        public var storedSmallRSS: Int
    }

    public var events: Int
    public var laterUse: LaterUse
    public var repeats: Int
    public var executable: String
    public var python: String
    public var serverURL: String?
    public var migrations: URL
    public var log: @Sendable (String) -> Void

    public init(
        events: Int, laterUse: LaterUse = LaterUse(), repeats: Int = 3, executable: String, python: String, serverURL: String?,
        migrations: URL, log: @escaping @Sendable (String) -> Void
    ) {
        self.events = events
        self.laterUse = laterUse
        self.repeats = max(1, repeats)
        self.executable = executable
        self.python = python
        self.serverURL = serverURL
        self.migrations = migrations
        self.log = log
    }

    static let yokedSteps = [
        "onboarding_started", "phone_entered", "otp_verified", "age_verified", "profile_created", "location_allowed",
        "questionnaire_started", "questionnaire_completed", "profiling_completed", "verification_consent_given",
        "verification_completed", "onboarding_completed",
    ]

    /// q1: the 12-step funnel by OS; q2: a `where` and a window per step; q3: `hold`.
    static let definitions: [(name: String, yaml: String)] = [
        ("q1", """
            name: q1_yoked_by_os
            app: yoked
            window: 24h
            breakdowns: [context.os.name]
            steps: [\(yokedSteps.map { "{event: \($0)}" }.joined(separator: ", "))]
            """),
        ("q2", """
            name: q2_otp_within_2m
            app: yoked
            window: 1h
            breakdowns: [context.device.type]
            steps:
              - {event: phone_entered, where: {context.app.version: 2.3.0}}
              - {event: otp_verified, within: 2m}
              - event: profile_created
            """),
        ("q3", """
            name: q3_yoked_same_version
            app: yoked
            window: 24h
            hold: [context.app.version]
            breakdowns: [context.os.name]
            steps: [\(yokedSteps.map { "{event: \($0)}" }.joined(separator: ", "))]
            """),
    ]

    public func run() async throws -> Result {
        try await BenchDatabase.with(serverURL: serverURL, migrations: migrations) { try await run(on: $0) }
    }

    private func run(on database: BenchDatabase) async throws -> Result {
        let pool = ConnectionPool(url: database.url, maxConnections: 1)
        defer { Task { await pool.close() } }
        let now = Date()
        let events = self.events, laterUse = self.laterUse
        log("writing about \(events) events over 30 days with COPY (later use ×\(laterUse.scale)) …")
        let (written, load) = try await measure {
            try await pool.withConnection { c in
                try LogWriter.append(c, count: events, from: now.addingTimeInterval(-30 * 86_400), to: now, seed: 1, prefix: "h", laterUse: laterUse)
            }
        }
        try await pool.query("VACUUM ANALYZE events")
        let appEvents = try await pool.query("SELECT count(*) FROM events WHERE app = 'yoked'").scalar(Int.self)
        let logBytes = try await pool.query("SELECT sum(pg_total_relation_size(c.oid))::int8 FROM pg_class c WHERE c.relname LIKE 'events%' AND c.relkind IN ('r', 'i', 't')").scalar(Int.self)

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("onramp-explore-bench-\(UUID().uuidString)")
        let cache = directory.appendingPathComponent("cache")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let asOf = Timestamps.format(microseconds: Timestamps.microseconds(now))
        func ask(_ file: URL, recount: Bool = false) throws -> (Double, [String: Any]) {
            let run = try ChildProcess.run([
                executable, "funnel", "--definition", file.path, "--database-url", database.url, "--cache", cache.path,
                "--as-of", asOf, "--format", "json", "--quiet",
            ] + (recount ? ["--recount"] : []))
            guard run.exit.status == 0, let start = run.output.firstIndex(of: "{"),
                  let json = try JSONSerialization.jsonObject(with: Data(run.output[start...].utf8)) as? [String: Any]
            else { throw BenchError("onramp funnel failed: \(run.output.suffix(2000))") }
            return (run.exit.seconds, json)
        }
        var files: [URL] = []
        for (name, yaml) in Self.definitions {
            let file = directory.appendingPathComponent("\(name).yaml")
            try yaml.write(to: file, atomically: true, encoding: .utf8)
            files.append(file)
        }
        // Another funnel of the app, so that q1's first time below is a first time.
        let warmUp = directory.appendingPathComponent("store.yaml")
        try """
            name: store_built
            app: yoked
            steps: [{event: onboarding_started}, {event: onboarding_completed}]
            """.write(to: warmUp, atomically: true, encoding: .utf8)
        log("the first query ever: the store read from the log …")
        let (build, _) = try ask(warmUp)
        var queries: [QueryRun] = []
        for ((name, yaml), file) in zip(Self.definitions, files) {
            log("\(name): first, then \(repeats) repeats and \(repeats) recounts, each a fresh onramp funnel …")
            let (first, json) = try ask(file)
            var samples: [Double] = [], recounts: [Double] = []
            for _ in 0..<repeats {
                samples.append(try ask(file).0)
                recounts.append(try ask(file, recount: true).0)
            }
            queries.append(QueryRun(
                name: name, definition: yaml, firstSeconds: first, repeatedSeconds: samples.min() ?? first, repeatedSamples: samples,
                recountSeconds: recounts.min() ?? first, recountSamples: recounts,
                started: json["started"] as? Int ?? 0, completed: json["completed"] as? Int ?? 0))
        }
        let storeBytes = Self.bytes(under: cache)

        // The SQL funnel and chDB's export read the identity links the nightly job writes.
        log("onramp rebuild (untimed), for the identity links the SQL funnel and chDB's export read …")
        let rebuild = try ChildProcess.run([executable, "rebuild", "--quiet", "--format", "json", "--database-url", database.url])
        guard rebuild.exit.status == 0 else { throw BenchError("rebuild failed: \(rebuild.output.suffix(2000))") }
        log("the 12-step funnel in plain SQL …")
        let funnel = Funnel(name: "q1", app: "yoked", steps: Self.yokedSteps.map { FunnelStep(.event($0)) })
        let (sqlPersons, sqlSeconds) = try await measure { try await pool.withConnection { try SQLFunnel.run($0, funnel: funnel) } }

        var result = Result(
            events: written, appEvents: appEvents, loadSeconds: load, storeBuildSeconds: build, storeBytes: storeBytes, logBytes: logBytes,
            queries: queries, sqlSeconds: sqlSeconds, sqlStepPersons: sqlPersons)
        if let q1 = files.first {
            result.persons = try await persons(pool, q1: q1, database: database, cache: cache, asOf: asOf)
        }
        result.aggregates = try await aggregates(pool, asOf: asOf)
        try await chdb(pool, directory: directory, into: &result)
        return result
    }

    /// The persons behind q1's largest drop-off (`PersonsRun`), after the
    /// night's tables are built (the rebuild above).
    private func persons(_ pool: ConnectionPool, q1: URL, database: BenchDatabase, cache: URL, asOf: String) async throws -> PersonsRun {
        func run(_ arguments: [String], rss: Bool = false) throws -> (seconds: Double, output: String, rss: Int) {
            let command = [executable] + arguments + ["--database-url", database.url]
            let run = try ChildProcess.run(rss ? ["/usr/bin/time", "-f", "peak-rss-kb %M"] + command : command)
            guard run.exit.status == 0 else { throw BenchError("\(arguments.joined(separator: " ")) failed: \(run.output.suffix(2000))") }
            let peak = rss ? run.output.split(separator: "\n").last { $0.hasPrefix("peak-rss-kb ") }.flatMap { Int($0.dropFirst(12)) } ?? 0 : 0
            return (run.exit.seconds, run.output, peak)
        }
        let funnel = ["funnel", "--definition", q1.path, "--cache", cache.path, "--as-of", asOf, "--quiet"]
        let (_, report, _) = try run(funnel + ["--format", "json"])
        guard let start = report.firstIndex(of: "{"),
              let steps = (try JSONSerialization.jsonObject(with: Data(report[start...].utf8)) as? [String: Any])?["steps"] as? [[String: Any]]
        else { throw BenchError("q1's report: no steps") }
        let drops = steps.dropLast().map { ($0["index"] as? Int ?? 0, $0["drop_off"] as? Int ?? 0) }
        guard let largest = drops.max(by: { $0.1 < $1.1 }), let smallest = drops.filter({ $0.1 > 0 }).min(by: { $0.1 < $1.1 }) else {
            throw BenchError("q1 has no drop-off")
        }
        log("the persons behind q1's largest drop-off (step \(largest.0), \(largest.1) persons), as list and paths, against q1 recounted …")
        var lists: [Double] = [], recounts: [Double] = [], paths: [Double] = [], diagnosed: [Double] = []
        for _ in 0..<repeats {
            lists.append(try run(funnel + ["--recount", "--persons", "dropped:\(largest.0)", "--format", "csv"]).seconds)
            recounts.append(try run(funnel + ["--recount", "--format", "json"]).seconds)
            paths.append(try run(funnel + ["--recount", "--paths-after", "\(largest.0)", "--format", "json"]).seconds)
            diagnosed.append(try run(funnel + ["--recount", "--diagnostics", "--format", "json"]).seconds)
        }
        log("peak RSS of a long list and a short one, at query time and from the night's tables …")
        let large = try run(funnel + ["--persons", "reached:1", "--format", "csv"], rss: true)
        let small = try run(funnel + ["--persons", "dropped:\(smallest.0)", "--format", "csv"], rss: true)
        let stored = ["report", "--funnel", "yoked_onboarding", "--format", "csv"]
        let storedLarge = try run(stored + ["--persons", "reached:1"], rss: true)
        let storedSmall = try run(stored + ["--persons", "dropped:\(smallest.0)"], rss: true)
        log("analytics.funnel_step_persons for the configured funnel's same cell …")
        var sqlSeconds: [Double] = [], sqlPersons = 0
        for _ in 0..<repeats {
            let (count, seconds) = try await measure {
                try await pool.query(
                    "SELECT count(*) FROM analytics.funnel_step_persons('yoked_onboarding', $1::integer, 'dropped')", [.int(Int64(largest.0))]
                ).scalar(Int.self)
            }
            sqlSeconds.append(seconds)
            sqlPersons = count
        }
        func lines(_ output: String) -> Int { output.split(separator: "\n").filter { !$0.hasPrefix("peak-rss-kb ") }.count - 1 }
        return PersonsRun(
            step: largest.0, dropped: largest.1, listSeconds: lists.min() ?? 0, recountSeconds: recounts.min() ?? 0,
            pathsSeconds: paths.min() ?? 0, diagnosticsRecountSeconds: diagnosed.min() ?? 0, sqlSeconds: sqlSeconds.min() ?? 0,
            sqlPersons: sqlPersons, largeList: lines(large.output), largeRSS: large.rss, smallList: lines(small.output), smallRSS: small.rss,
            storedLargeRSS: storedLarge.rss, storedSmallRSS: storedSmall.rss)
    }

    /// q1 through the SQL aggregates (`AggregatesRun`).
    private func aggregates(_ pool: ConnectionPool, asOf: String) async throws -> AggregatesRun {
        let steps = Self.yokedSteps.indices.map { "event = $\($0 + 1)" }.joined(separator: ", ")
        @Sendable func q1(_ aggregate: String) -> String {
            """
            SELECT level, count(*)::int8 FROM (
                SELECT person_id, \(aggregate) AS level FROM analytics.events
                WHERE app = 'yoked' AND type = 'track' GROUP BY person_id) AS persons
            GROUP BY level
            """
        }
        let names = Self.yokedSteps.map { PostgresValue.text($0) }
        let definition = #"{"app": "yoked", "window": "24h", "steps": ["#
            + Self.yokedSteps.map { #"{"event": "\#($0)"}"# }.joined(separator: ", ") + "]}"
        let report = "SELECT persons FROM analytics.funnel_report($1::jsonb, $2::timestamptz) ORDER BY step_index"
        let repeats = self.repeats, log = self.log, stepCount = Self.yokedSteps.count
        /// Persons reaching each step, from (level, persons) rows.
        @Sendable func reached(_ rows: QueryResult) throws -> [Int] {
            var byLevel: [Int: Int] = [:]
            for row in rows.rows { byLevel[try row.decode(Int.self, at: 0)] = try row.decode(Int.self, at: 1) }
            return (1...stepCount).map { step in byLevel.filter { $0.key >= step }.values.reduce(0, +) }
        }
        @Sendable func seconds(_ body: () throws -> Void) rethrows -> Double {
            let start = ContinuousClock.now
            try body()
            return (ContinuousClock.now - start).seconds
        }
        @Sendable func best(_ body: () throws -> Void) rethrows -> Double {
            var samples: [Double] = []
            for _ in 0..<repeats { samples.append(try seconds(body)) }
            return samples.min() ?? 0
        }
        return try await pool.withConnection { c in
            let implementation = try FunnelAggregates.transitionFunction(c, of: "analytics.window_funnel(interval, timestamptz, boolean[])")
            // The fallback, made as migration 016 makes it; funnel_report's own
            // aggregate is swapped in a transaction rolled back after.
            try c.executeScript(
                """
                CREATE AGGREGATE pg_temp.fallback_window_funnel(interval, timestamptz, VARIADIC boolean[]) (
                    SFUNC = analytics.window_funnel_add, STYPE = bigint[], FINALFUNC = analytics.window_funnel_level)
                """)
            log("q1 through analytics.window_funnel (\(implementation)), the count(*) floor, and the PL/pgSQL fallback …")
            var levels: [Int] = [], fallbackLevels: [Int] = []
            let floor = try best { _ = try c.query(q1("count(*)")) }
            let native = try best { levels = try reached(c.query(q1("analytics.window_funnel(interval '24 hours', \"timestamp\", \(steps))"), names)) }
            let fallback = try seconds {
                fallbackLevels = try reached(c.query(q1("pg_temp.fallback_window_funnel(interval '24 hours', \"timestamp\", \(steps))"), names))
            }
            log("q1 through analytics.funnel_report, native and the fallback …")
            var persons: [Int] = [], fallbackPersons: [Int] = []
            let funnelReport = try best { persons = try c.query(report, [.json(definition), .text(asOf)]).rows.map { try $0.decode(Int.self, at: 0) } }
            try c.executeScript(
                """
                BEGIN;
                DROP AGGREGATE analytics.window_funnel_masks(interval, timestamptz, bigint, integer);
                CREATE AGGREGATE analytics.window_funnel_masks(interval, timestamptz, bigint, integer) (
                    SFUNC = analytics.window_funnel_add_mask, STYPE = bigint[], FINALFUNC = analytics.window_funnel_level)
                """)
            let reportFallback = try seconds {
                fallbackPersons = try c.query(report, [.json(definition), .text(asOf)]).rows.map { try $0.decode(Int.self, at: 0) }
            }
            try c.executeScript("ROLLBACK")
            return AggregatesRun(
                implementation: implementation, floorSeconds: floor, windowFunnelSeconds: native, fallbackSeconds: fallback,
                funnelReportSeconds: funnelReport, funnelReportFallbackSeconds: reportFallback, reached: levels, fallbackReached: fallbackLevels,
                funnelReportReached: persons, funnelReportFallbackReached: fallbackPersons)
        }
    }

    /// Exports the events to Parquet (with chDB itself, untimed), then times
    /// `windowFunnel` over them: the first run in a fresh process, and the
    /// best of the repeats. Each event carries its person, merged as the
    /// nightly job merges identities: chDB is handed the merge, its best case.
    private func chdb(_ pool: ConnectionPool, directory: URL, into result: inout Result) async throws {
        // A Python that cannot be run is one without chdb: the rest of the run stands.
        let probe = try? ChildProcess.run([python, "-c", "import chdb"])
        guard let probe, probe.exit.status == 0 else {
            result.chdbNote = "chdb not importable by \(python) (pip install chdb): \(probe.map { String($0.output.suffix(300)) } ?? "cannot run it")"
            log(result.chdbNote ?? "")
            return
        }
        log("chDB: exporting the events to Parquet …")
        let csv = directory.appendingPathComponent("events.csv")
        guard FileManager.default.createFile(atPath: csv.path, contents: nil) else { throw BenchError("cannot create \(csv.path)") }
        let handle = try FileHandle(forWritingTo: csv)
        _ = try await pool.withConnection { c in
            try c.copyOut(
                """
                COPY (SELECT e.app, e.type, coalesce(e.event, ''), coalesce(l.person_id, e.user_id, e.anonymous_id),
                             (extract(epoch FROM e."timestamp") * 1000000)::int8, coalesce(e.context #>> '{os,name}', '')
                      FROM events e LEFT JOIN identity_links l ON l.app = e.app AND l.anonymous_id = coalesce(e.user_id, e.anonymous_id)) TO STDOUT (FORMAT csv)
                """
            ) { try handle.write(contentsOf: Data($0)) }
        }
        try handle.close()
        let parquet = directory.appendingPathComponent("events.parquet")
        let script = directory.appendingPathComponent("windowfunnel.py")
        try Self.chdbScript.write(to: script, atomically: true, encoding: .utf8)
        let convert = try ChildProcess.run([python, script.path, "convert", csv.path, parquet.path])
        guard convert.exit.status == 0 else { throw BenchError("chDB export failed: \(convert.output.suffix(2000))") }
        try? FileManager.default.removeItem(at: csv)
        let steps = Self.yokedSteps.joined(separator: ",")
        let first = try ChildProcess.run([python, script.path, "query", parquet.path, steps, "1"])
        let best = try ChildProcess.run([python, script.path, "query", parquet.path, steps, "\(repeats)"])
        guard first.exit.status == 0, best.exit.status == 0,
              let firstLine = first.output.split(separator: "\n").last, let bestLine = best.output.split(separator: "\n").last,
              let firstJSON = try JSONSerialization.jsonObject(with: Data(firstLine.utf8)) as? [String: Any],
              let bestJSON = try JSONSerialization.jsonObject(with: Data(bestLine.utf8)) as? [String: Any]
        else { throw BenchError("chDB query failed: \(first.output.suffix(1000)) \(best.output.suffix(1000))") }
        result.chdbFirstSeconds = (firstJSON["seconds"] as? [Double])?.first
        result.chdbBestSeconds = (bestJSON["seconds"] as? [Double])?.min()
        result.chdbStepPersons = bestJSON["reached"] as? [Int]
    }

    static func bytes(under directory: URL) -> Int {
        guard let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.fileSizeKey]) else { return 0 }
        var total = 0
        for case let file as URL in files { total += (try? file.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0 }
        return total
    }

    /// `convert CSV PARQUET`, or `query PARQUET STEPS N`: N runs of q1's
    /// windowFunnel in this process, printing their seconds and the persons
    /// reaching each step as one JSON line.
    static let chdbScript = """
        import json, sys, time
        import chdb

        columns = "app String, type String, event String, person String, ts UInt64, os String"
        if sys.argv[1] == "convert":
            chdb.query(f"SELECT * FROM file('{sys.argv[2]}', CSV, '{columns}') INTO OUTFILE '{sys.argv[3]}' FORMAT Parquet")
            sys.exit(0)
        path, steps, runs = sys.argv[2], sys.argv[3].split(","), int(sys.argv[4])
        conditions = ", ".join(f"event = '{s}'" for s in steps)
        sql = (f"SELECT os, level, count() AS persons FROM ("
               f" SELECT person, any(os) AS os, windowFunnel(86400000000)(ts, {conditions}) AS level"
               f" FROM file('{path}', Parquet, '{columns}') WHERE app = 'yoked' GROUP BY person)"
               f" GROUP BY os, level ORDER BY os, level")
        seconds = []
        for _ in range(runs):
            start = time.perf_counter()
            rows = chdb.query(sql, "JSONCompact")
            seconds.append(time.perf_counter() - start)
        data = json.loads(rows.bytes())["data"]
        reached = [sum(int(r[2]) for r in data if int(r[1]) >= k) for k in range(1, len(steps) + 1)]
        print(json.dumps({"seconds": seconds, "reached": reached}))
        """
}
