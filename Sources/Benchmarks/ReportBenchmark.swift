public import Foundation
import Funnels
import LibPQ
import LocalPostgres

/// `onramp bench report`: the nightly job against the read limit of this machine.
///
/// Writes a realistic history (the simulator's journeys) of `events` messages
/// over 30 days with COPY, then, in the same run: the raw read limit (`COPY
/// (SELECT … FROM events) TO STDOUT`, discarded), `onramp rebuild`, the
/// one-query SQL funnel for each configured funnel (`SQLFunnel`), one more day
/// appended, and the incremental `onramp report`. Ratios, not absolute times,
/// are the result: this machine is shared and noisy.
public struct ReportBenchmark: Sendable {
    public struct Result: Sendable, Codable {
        public var events: Int
        public var loadSeconds: Double
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

        public var rebuildEventsPerSecond: Double { Double(events) / rebuildSeconds }
        public var rebuildOverRawScan: Double { rebuildSeconds / rawScanSeconds }
        public var rebuildOverSQLFunnels: Double { rebuildSeconds / sqlFunnelSeconds }
        public var incrementalOverRebuild: Double { incrementalSeconds / rebuildSeconds }
    }

    public struct SQLFunnelRun: Sendable, Codable {
        public var funnel: String
        public var seconds: Double
        /// Persons reaching each required step, as the greedy SQL chain counts them.
        public var stepPersons: [Int]
    }

    public var events: Int
    public var executable: String
    public var serverURL: String?
    public var migrations: URL
    public var log: @Sendable (String) -> Void

    public init(events: Int, executable: String, serverURL: String?, migrations: URL, log: @escaping @Sendable (String) -> Void) {
        self.events = events
        self.executable = executable
        self.serverURL = serverURL
        self.migrations = migrations
        self.log = log
    }

    public func run() async throws -> Result {
        let database = try await BenchDatabase.make(serverURL: serverURL, migrations: migrations)
        defer { database.finish() }
        let pool = ConnectionPool(url: database.url, maxConnections: 1)
        let now = Date()
        let historyStart = now.addingTimeInterval(-31 * 86_400)
        let historyEnd = now.addingTimeInterval(-86_400)
        let events = self.events
        log("writing \(events) events over 30 days with COPY …")
        let (written, load) = try await measure {
            try await pool.withConnection { c in
                try LogWriter.append(c, count: events, from: historyStart, to: historyEnd, seed: 1, prefix: "h")
            }
        }
        try await pool.query("VACUUM ANALYZE events")
        try await pool.query("VACUUM ANALYZE event_ids")
        log("raw scan: COPY (SELECT … FROM events) TO STDOUT …")
        let (bytes, scan) = try await measure {
            try await pool.withConnection { c in
                try c.copyOut("COPY (SELECT * FROM events) TO STDOUT") { _ in }
            }
        }
        log("onramp rebuild …")
        let rebuild = try ChildProcess.run(
            [executable, "rebuild", "--quiet", "--format", "json", "--database-url", database.url])
        guard rebuild.status == 0 else { throw BenchError("rebuild failed: \(rebuild.output.suffix(2000))") }
        log("one-query SQL funnels …")
        var sqlRuns: [SQLFunnelRun] = []
        for funnel in try FunnelConfiguration.default().funnels {
            let (persons, seconds) = try await measure { try await pool.withConnection { try SQLFunnel.run($0, funnel: funnel) } }
            sqlRuns.append(SQLFunnelRun(funnel: funnel.name, seconds: seconds, stepPersons: persons))
        }
        let dayCount = max(1, events / 30)
        log("appending one more day (\(dayCount) events) and running the incremental report …")
        _ = try await pool.withConnection { c in
            try LogWriter.append(c, count: dayCount, from: historyEnd, to: now, seed: 2, prefix: "d")
        }
        try await pool.query("ANALYZE events")
        let incremental = try ChildProcess.run(
            [executable, "report", "--quiet", "--format", "json", "--database-url", database.url])
        guard incremental.status == 0 else { throw BenchError("report failed: \(incremental.output.suffix(2000))") }
        await pool.close()
        return Result(
            events: written, loadSeconds: load, rawScanSeconds: scan, rawScanBytes: bytes, rebuildSeconds: rebuild.seconds,
            rebuildPeakRSSMegabytes: Double(rebuild.maxResidentKilobytes) / 1024,
            sqlFunnelSeconds: sqlRuns.map(\.seconds).reduce(0, +), sqlFunnels: sqlRuns, dayEvents: dayCount,
            incrementalSeconds: incremental.seconds,
            incrementalPeakRSSMegabytes: Double(incremental.maxResidentKilobytes) / 1024)
    }
}
