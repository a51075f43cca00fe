public import Foundation
import Funnels
import LibPQ
import LocalPostgres
public import Simulation

/// `onramp-bench report`: the nightly job against the read limit of this machine.
///
/// Writes a realistic history (the simulator's journeys, and the devices'
/// everyday use after onboarding as `laterUse` scales it) of about `events`
/// messages over `days` days (30 by default) with COPY, then, in the same run and `rounds` times over: the
/// raw read limit (`COPY (SELECT … FROM events) TO STDOUT`, discarded),
/// `onramp rebuild`, the one-query SQL funnel for each configured funnel
/// (`SQLFunnel`), and the incremental `onramp report` of one more day (on a
/// copy of the rebuilt database with the day appended). Ratios, not absolute
/// times, are the result: this machine is shared and noisy.
public struct ReportBenchmark: Sendable {
    public struct Result: Sendable, Codable {
        public var events: Int
        public var days: Int
        public var loadSeconds: Double
        /// The rebuild before the rounds: a log that never had a night has no
        /// event catalogue yet, and its first run builds it from the whole log,
        /// a one-off. Taken out of the rounds so that each times the same work.
        public var firstRebuildSeconds: Double
        public var firstRebuildPeakRSSMegabytes: Double
        public var rawScanSeconds: Double
        public var rawScanBytes: Int
        public var rebuildSeconds: Double
        public var rebuildPeakRSSMegabytes: Double
        /// The one-query SQL funnels, one per configured funnel, run one after another.
        public var sqlFunnelSeconds: Double
        public var sqlFunnels: [SQLFunnelRun]
        public var dayEvents: Int
        public var incrementalSeconds: Double
        public var incrementalPeakRSSMegabytes: Double
        /// Scan, rebuild, SQL funnels and the nightly run ran this many times,
        /// interleaved; the seconds above are the medians, the samples below every run.
        public var rounds: Int
        public var rawScanSamples: [Double]
        public var rebuildSamples: [Double]
        public var sqlFunnelSamples: [Double]
        /// One report per round, after its rebuild, each on a copy of the database with the day appended.
        public var incrementalSamples: [Double]

        public var rebuildEventsPerSecond: Double { Double(events) / rebuildSeconds }
        /// The first rebuild, which counts the catalogue whole, against the rounds' median rebuild.
        public var firstRebuildOverRebuild: Double { firstRebuildSeconds / rebuildSeconds }
        /// Each round's rebuild against that round's scan: paired, so a slow
        /// spell of the machine cancels out; the median of the rounds.
        public var rebuildOverRawScan: Double { ReportBenchmark.median(rebuildOverRawScanByRound) }
        public var rebuildOverSQLFunnels: Double { ReportBenchmark.median(rebuildOverSQLFunnelsByRound) }
        public var rebuildOverRawScanByRound: [Double] { zip(rebuildSamples, rawScanSamples).map { $0 / $1 } }
        public var rebuildOverSQLFunnelsByRound: [Double] { zip(rebuildSamples, sqlFunnelSamples).map { $0 / $1 } }
        /// Each round's nightly run against that round's rebuild, as above.
        public var incrementalOverRebuild: Double { ReportBenchmark.median(incrementalOverRebuildByRound) }
        public var incrementalOverRebuildByRound: [Double] { zip(incrementalSamples, rebuildSamples).map { $0 / $1 } }
    }

    public struct SQLFunnelRun: Sendable, Codable {
        public var funnel: String
        public var seconds: Double
        /// Persons reaching each required step, as the greedy SQL chain counts them.
        public var stepPersons: [Int]
    }

    public var events: Int
    /// Days of history the events spread over (the day after them is the night's).
    public var days: Int
    /// How much devices use the app after onboarding (0: onboarding only).
    public var laterUse: LaterUse
    public var rounds: Int
    public var executable: String
    public var serverURL: String?
    public var migrations: URL
    /// When set, a copy of the database as the incremental run finds it
    /// (the day appended, nothing reported yet) is left on the server under
    /// the bench database's name and this suffix, for timing and profiling
    /// the nightly run again by hand.
    public var keptCopySuffix: String?
    public var log: @Sendable (String) -> Void

    public init(
        events: Int, days: Int = 30, laterUse: LaterUse = LaterUse(), rounds: Int = 3, executable: String, serverURL: String?,
        migrations: URL,
        keptCopySuffix: String? = nil, log: @escaping @Sendable (String) -> Void
    ) {
        self.events = events
        self.days = days
        self.laterUse = laterUse
        self.rounds = max(1, rounds)
        self.executable = executable
        self.serverURL = serverURL
        self.migrations = migrations
        self.keptCopySuffix = keptCopySuffix
        self.log = log
    }

    public func run() async throws -> Result {
        try await BenchDatabase.with(serverURL: serverURL, migrations: migrations) { try await run(on: $0) }
    }

    /// The suffixes of the copies the benchmark makes itself: the nightly
    /// run's database and each round's copy of it. `keptCopySuffix` must be
    /// none of them.
    public static func isReservedCopySuffix(_ suffix: String) -> Bool {
        suffix == nightlySuffix || (suffix.first == "r" && suffix.dropFirst().allSatisfy(\.isNumber) && suffix.count > 1)
    }

    private static let nightlySuffix = "nightly"

    private func run(on database: BenchDatabase) async throws -> Result {
        var pool = ConnectionPool(url: database.url, maxConnections: 1)
        let now = Date()
        let historyStart = now.addingTimeInterval(-Double(days + 1) * 86_400)
        let historyEnd = now.addingTimeInterval(-86_400)
        let events = self.events, laterUse = self.laterUse
        // One history of `days` + 1 days, cut a day before its end: the log,
        // and the day the incremental run reads (new devices' onboarding and
        // the earlier ones' everyday use). The same events a day over ten
        // times the days is the same traffic over a history ten times as long.
        let generated = events + events / days
        log("writing about \(events) events over \(days) days with COPY (later use ×\(laterUse.scale)) …")
        let (written, load) = try await measure {
            try await pool.withConnection { c in
                try LogWriter.append(
                    c, count: generated, from: historyStart, to: now, seed: 1, prefix: "h", laterUse: laterUse,
                    kept: historyStart..<historyEnd, receivedAt: historyEnd)
            }
        }
        try await pool.query("VACUUM ANALYZE events")
        try await pool.query("VACUUM ANALYZE event_ids")
        log("the first rebuild, which also builds the event catalogue (not a round) …")
        // Settled as each round's rebuild is: the load's dirty pages are not its to write.
        try await Self.settle(pool)
        let first = try rebuild(database.url)
        // Interleaved rounds, so a slow spell of this shared machine weighs on
        // all four alike; medians, so one outlier does not decide a ratio.
        // The nightly run too: each round's report runs right after that
        // round's rebuild, on a copy of the nightly run's database, so its
        // ratio is taken within the round as the others are. Timed after
        // every rebuild instead, the reports had met other spells than the
        // rebuilds they were divided by.
        var scans: [Double] = [], rebuilds: [Double] = [], sqlTotals: [Double] = []
        var bytes = 0
        var rebuildRSS = 0
        var sqlRuns: [[SQLFunnelRun]] = []
        var nightly: (url: String, dayEvents: Int)?
        var incrementals: [Double] = []
        var incrementalRSS = 0
        // The persons' funnels: `SQLFunnel` counts persons.
        let funnels = try FunnelConfiguration.default().funnels.filter { $0.aggregateBy == .person }
        do {
            for round in 1...rounds {
                log("round \(round)/\(rounds): raw scan (COPY (SELECT * FROM events) TO STDOUT), onramp rebuild, one-query SQL funnels, the nightly run …")
                try await Self.settle(pool)
                let (scanned, scan) = try await measure {
                    try await pool.withConnection { c in
                        try c.copyOut("COPY (SELECT * FROM events) TO STDOUT") { _ in }
                    }
                }
                bytes = scanned
                scans.append(scan)
                try await Self.settle(pool)
                let rebuild = try rebuild(database.url)
                rebuilds.append(rebuild.seconds)
                rebuildRSS = max(rebuildRSS, rebuild.maxResidentKilobytes)
                var runs: [SQLFunnelRun] = []
                for funnel in funnels {
                    let (persons, seconds) = try await measure { try await pool.withConnection { try SQLFunnel.run($0, funnel: funnel) } }
                    runs.append(SQLFunnelRun(funnel: funnel.name, seconds: seconds, stepPersons: persons))
                }
                sqlRuns.append(runs)
                sqlTotals.append(runs.map(\.seconds).reduce(0, +))
                if nightly == nil {
                    // A copy is taken with nobody connected to its template.
                    await pool.close()
                    nightly = try await appendDay(to: database, from: historyStart, to: now, kept: historyEnd..<now, count: generated)
                    pool = ConnectionPool(url: database.url, maxConnections: 1)
                }
                guard let nightly else { break }
                let incremental = try await report(round: round, nightly: nightly.url, on: database)
                incrementals.append(incremental.seconds)
                incrementalRSS = max(incrementalRSS, incremental.maxResidentKilobytes)
            }
        } catch {
            await pool.close()
            // On a server of one's own, the copies would be left behind.
            try? await database.dropCopy("r\(incrementals.count + 1)")
            try? await database.dropCopy(Self.nightlySuffix)
            throw error
        }
        await pool.close()
        try await database.dropCopy(Self.nightlySuffix)
        let sqlFunnels = (sqlRuns.first ?? []).indices.map { index in
            var run = sqlRuns[0][index]
            run.seconds = Self.median(sqlRuns.map { $0[index].seconds })
            return run
        }
        return Result(
            events: written, days: days, loadSeconds: load, firstRebuildSeconds: first.seconds,
            firstRebuildPeakRSSMegabytes: Double(first.maxResidentKilobytes) / 1024, rawScanSeconds: Self.median(scans), rawScanBytes: bytes,
            rebuildSeconds: Self.median(rebuilds), rebuildPeakRSSMegabytes: Double(rebuildRSS) / 1024,
            sqlFunnelSeconds: Self.median(sqlTotals), sqlFunnels: sqlFunnels, dayEvents: nightly?.dayEvents ?? 0,
            incrementalSeconds: Self.median(incrementals),
            incrementalPeakRSSMegabytes: Double(incrementalRSS) / 1024,
            rounds: rounds, rawScanSamples: scans, rebuildSamples: rebuilds, sqlFunnelSamples: sqlTotals,
            incrementalSamples: incrementals)
    }

    /// Lets the server settle before a timed step: a checkpoint, so the
    /// step does not write the dirty pages of the one before, and no
    /// autovacuum at work (a rebuild's tables are vacuumed and analysed
    /// after it commits). On two cores, either beside a step weighs on it.
    private static func settle(_ pool: ConnectionPool) async throws {
        try await pool.query("CHECKPOINT")
        for _ in 0..<600 {
            let busy = try await pool.query(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'").scalar(Int.self)
            if busy == 0 { return }
            try await Task.sleep(nanoseconds: 500_000_000)
        }
    }

    /// One timed `onramp rebuild` of the database at `url`.
    private func rebuild(_ url: String) throws -> ChildProcess.Exit {
        try timed("rebuild", url)
    }

    /// The round's timed `onramp report`. One report is one sample of a
    /// noisy machine, and a report cannot be repeated on the same database
    /// (it moves the checkpoint): with several rounds each runs on its own
    /// copy of the nightly run's database, with one on that database itself.
    private func report(round: Int, nightly: String, on database: BenchDatabase) async throws -> ChildProcess.Exit {
        let suffix = "r\(round)"
        let url = rounds == 1 ? nightly : try await database.copy(suffix, of: Self.nightlySuffix)
        let report = Swift.Result<ChildProcess.Exit, any Error> { try timed("report", url) }
        if rounds > 1 { try await database.dropCopy(suffix) }
        return try report.get()
    }

    /// `onramp <command> --quiet --format json` on the database at `url`, timed; throws its output's end if it fails.
    private func timed(_ command: String, _ url: String) throws -> ChildProcess.Exit {
        let run = try ChildProcess.run([executable, command, "--quiet", "--format", "json", "--database-url", url])
        guard run.exit.status == 0 else { throw BenchError("\(command) failed: \(run.output.suffix(2000))") }
        return run.exit
    }

    /// The nightly run's database: a copy of the bench database as the
    /// rebuild left it, with the history's held-back day (`kept`) appended,
    /// as the day's ingestion would have; returns its URL and the day's events.
    private func appendDay(
        to database: BenchDatabase, from historyStart: Date, to now: Date, kept: Range<Date>, count generated: Int
    ) async throws -> (url: String, dayEvents: Int) {
        log("appending one more day to a copy of the rebuilt history, for the nightly run …")
        let url = try await database.copy(Self.nightlySuffix)
        let pool = ConnectionPool(url: url, maxConnections: 1)
        let dayEvents: Int
        do {
            dayEvents = try await pool.withConnection { c in
                try LogWriter.append(
                    c, count: generated, from: historyStart, to: now, seed: 1, prefix: "h", laterUse: laterUse, kept: kept,
                    receivedAt: now)
            }
            try await pool.query("ANALYZE events")
            // The rebuild leaves dirty pages behind; the nightly run does not
            // start with a checkpoint's backlog of them.
            try await pool.query("CHECKPOINT")
        } catch {
            await pool.close()
            throw error
        }
        await pool.close()
        if let keptCopySuffix {
            log("kept a copy of the database before the report: \(try await database.copy(keptCopySuffix, of: Self.nightlySuffix))")
        }
        return (url, dayEvents)
    }

    public static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }
}
