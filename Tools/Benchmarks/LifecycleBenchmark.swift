import DataLifecycle
public import Foundation
import LibPQ
import LocalPostgres
import Simulation

/// `onramp-bench lifecycle` (BENCHMARKS.md, "`onramp-bench lifecycle`"): a
/// month of a log archived and exported, against the floor of reading the
/// same rows out: `COPY … TO STDOUT` of the month piped through `gzip -1`.
/// The log holds `events` events, `monthEvents` of them received over the
/// days of January 2025 (a partition of their own), the rest in the current
/// month. Each round, interleaved: the floor, the export of every app's
/// month (JSON lines, to files), the archive (written, read back, the
/// partition dropped), and the restore that puts the month back for the next round.
public struct LifecycleBenchmark: Sendable {
    public struct Result: Sendable, Codable {
        public var events: Int
        public var monthEvents: Int
        public var rounds: Int
        /// Medians, in seconds.
        public var copyGzipSeconds: Double
        public var exportSeconds: Double
        /// The same export as CSV.
        public var exportCSVSeconds: Double
        public var archiveSeconds: Double
        public var restoreSeconds: Double
        /// Compressed bytes: the floor's gzip output, and the archive's files.
        public var copyGzipBytes: Int
        public var archiveBytes: Int
        /// The floor's time over each: at least 0.5 is the goal.
        public var exportRatio: Double { copyGzipSeconds / exportSeconds }
        public var exportCSVRatio: Double { copyGzipSeconds / exportCSVSeconds }
        public var archiveRatio: Double { copyGzipSeconds / archiveSeconds }
    }

    public var events: Int
    public var monthEvents: Int
    public var rounds: Int
    public var serverURL: String?
    public var migrations: URL
    /// With a server: a copy of the history, named after the bench database with this suffix, kept for work by hand.
    public var keptCopySuffix: String?
    public var log: @Sendable (String) -> Void

    public init(
        events: Int, monthEvents: Int, rounds: Int, serverURL: String?, migrations: URL, keptCopySuffix: String? = nil,
        log: @escaping @Sendable (String) -> Void
    ) {
        self.events = events
        self.monthEvents = monthEvents
        self.rounds = rounds
        self.serverURL = serverURL
        self.migrations = migrations
        self.keptCopySuffix = keptCopySuffix
        self.log = log
    }

    static let month = "2025-01"
    static let monthStart = Date(timeIntervalSince1970: 1_735_689_600)

    public func run() async throws -> Result {
        try await BenchDatabase.with(serverURL: serverURL, migrations: migrations) { database in
            try write(database.url)
            if let keptCopySuffix {
                // Made while nothing is connected to the history, before any round archives its month.
                log("kept a copy of the history: \(try await database.copy(keptCopySuffix))")
            }
            let c = try Connection.connect(database.url)
            let apps = try c.query("SELECT DISTINCT app FROM events ORDER BY 1").rows.map { try $0.decode(String.self, at: 0) }
            let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("onramp-lifecycle-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: scratch) }
            var floor: [Double] = [], export: [Double] = [], exportCSV: [Double] = [], archive: [Double] = [], restore: [Double] = []
            var floorBytes = 0, archiveBytes = 0
            for round in 1...rounds {
                let (bytes, floorSeconds) = try await measure { try Self.copyThroughGzip(c, to: scratch.appendingPathComponent("floor.gz").path) }
                floorBytes = bytes
                floor.append(floorSeconds)
                func exportAll(_ format: EventExport.Format) throws {
                    for app in apps {
                        // Buffered as `onramp export` writes its file (stdio), not a write per message.
                        guard let out = fopen(scratch.appendingPathComponent("\(app).\(format.rawValue)").path, "w") else {
                            throw BenchError("cannot write the export of \(app)")
                        }
                        defer { fclose(out) }
                        let day: Int64 = 86_400_000_000, first = Int64(Self.monthStart.timeIntervalSince1970) * 1_000_000
                        _ = try EventExport(app: app, from: first, until: first + 31 * day, format: format).run(c) { chunk in
                            if let base = chunk.baseAddress, fwrite(base, 1, chunk.count, out) != chunk.count { throw BenchError("a short write") }
                        }
                    }
                }
                let (_, exportSeconds) = try await measure { try exportAll(.jsonl) }
                export.append(exportSeconds)
                let (_, exportCSVSeconds) = try await measure { try exportAll(.csv) }
                exportCSV.append(exportCSVSeconds)
                let directory = scratch.appendingPathComponent("archive-\(round)").path
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                let (archived, archiveSeconds) = try await measure { try MonthArchive(month: Self.month, directory: directory).run(c) }
                archiveBytes = archived.bytes
                archive.append(archiveSeconds)
                let (restored, restoreSeconds) = try await measure { try ArchiveRestore(month: Self.month, directory: directory).run(c) }
                guard restored.restored == monthEvents, archived.messages == monthEvents else {
                    throw BenchError("round \(round): archived \(archived.messages), restored \(restored.restored) of \(monthEvents)")
                }
                restore.append(restoreSeconds)
                try? FileManager.default.removeItem(atPath: directory)
                try c.executeScript("VACUUM ANALYZE events")
                log(String(format: "round %d: copy | gzip -1 %.2f s, export jsonl %.2f s, csv %.2f s, archive %.2f s, restore %.2f s",
                           round, floorSeconds, exportSeconds, exportCSVSeconds, archiveSeconds, restoreSeconds))
            }
            return Result(
                events: events, monthEvents: monthEvents, rounds: rounds, copyGzipSeconds: ReportBenchmark.median(floor),
                exportSeconds: ReportBenchmark.median(export), exportCSVSeconds: ReportBenchmark.median(exportCSV), archiveSeconds: ReportBenchmark.median(archive),
                restoreSeconds: ReportBenchmark.median(restore), copyGzipBytes: floorBytes, archiveBytes: archiveBytes)
        }
    }

    /// `COPY (the month's rows) TO STDOUT`, each chunk written to `gzip -1`'s
    /// standard input as it comes; returns gzip's output size.
    static func copyThroughGzip(_ c: Connection, to path: String) throws -> Int {
        let gzip = Process()
        gzip.executableURL = URL(fileURLWithPath: "/bin/gzip")
        gzip.arguments = ["-1"]
        let input = Pipe()
        gzip.standardInput = input
        gzip.standardOutput = try FileHandle(forWritingTo: create(URL(fileURLWithPath: path)))
        try gzip.run()
        let writer = input.fileHandleForWriting
        _ = try c.copyOut(
            """
            COPY (SELECT * FROM events WHERE received_at >= '2025-01-01 00:00:00+00' AND received_at < '2025-02-01 00:00:00+00') TO STDOUT
            """
        ) { chunk in writer.write(Data(chunk)) }
        try writer.close()
        gzip.waitUntilExit()
        return (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }

    /// The history: most of it received over the last 30 days, the month's share over the days of `month`.
    private func write(_ url: String) throws {
        let c = try Connection.connect(url)
        try c.query("SELECT onramp_create_month_partition('2025-01-01')")
        log("writing \(events - monthEvents) events received now and \(monthEvents) over the days of \(Self.month)")
        let now = Date()
        try LogWriter.append(c, count: events - monthEvents, from: now.addingTimeInterval(-30 * 86_400), to: now, seed: 70, prefix: "now")
        let perDay = monthEvents / 31
        for day in 0..<31 {
            let from = Self.monthStart.addingTimeInterval(Double(day) * 86_400)
            let count = day == 30 ? monthEvents - perDay * 30 : perDay
            try LogWriter.append(
                c, count: count, from: from, to: from.addingTimeInterval(86_000), seed: 700 + UInt64(day), prefix: "m\(day)",
                receivedAt: from.addingTimeInterval(86_300))
        }
        try c.executeScript("VACUUM ANALYZE")
    }

    static func create(_ url: URL) throws -> URL {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else { throw BenchError("cannot write \(url.path)") }
        return url
    }
}
