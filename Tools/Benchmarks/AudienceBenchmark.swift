public import Foundation
import Funnels
import LibPQ
import LocalPostgres
public import Simulation

/// `onramp-bench audiences` (docs/audiences.md): what keeping five audiences
/// costs. Writes the report benchmark's history (`events` over `days` days,
/// with everyday use), then on two copies, one configured with the shipped
/// funnels and one with the same funnels and five audiences: a rebuild, the
/// night of one more day (the pair's ratio is the cost of the audiences to
/// a night), `onramp audiences run` with nothing new, and after ten
/// minutes' traffic (the day ÷ 144). Each step runs `rounds` times on its
/// own copy, medians reported; ratios within a round.
public struct AudienceBenchmark: Sendable {
    public struct Result: Sendable, Codable {
        public var events: Int
        public var days: Int
        public var rounds: Int
        public var dayEvents: Int
        public var tenMinuteEvents: Int
        public var nightSeconds: Double
        public var nightWithAudiencesSeconds: Double
        /// Median of the rounds' ratios (goal ≤ 1.2).
        public var nightRatio: Double
        public var nightRatios: [Double]
        /// `onramp audiences run` with nothing new, whole process (goal ≤ 0.1 s).
        public var quietRunSeconds: Double
        public var quietRunSamples: [Double]
        /// `onramp audiences run` after ten minutes' traffic, whole process (goal ≤ 1 s).
        public var tenMinuteRunSeconds: Double
        public var tenMinuteRunSamples: [Double]
        public var tenMinutePeakRSSMegabytes: Double
        /// Members after the night, by audience.
        public var members: [String: Int]
    }

    /// The five audiences over the shipped funnels and the simulator's events.
    public static let audiences = """

        audiences:
          - {name: stuck_at_phone, funnel: yoked_onboarding, stalled: {step: 2, for: 1h}}
          - {name: onboarded, funnel: yoked_onboarding, outcome: completed}
          - {name: otp_trouble, app: yoked, did: {event: otp_failed, within: 1d}}
          - {name: companies_without_employees, funnel: ops_companies, outcome: dropped, step: 3}
          - name: stuck_without_trouble
            all_of:
              - audience: stuck_at_phone
              - not: {audience: otp_trouble}

        """

    public let events: Int
    public let days: Int
    public let rounds: Int
    let laterUse: LaterUse
    let executable: String
    let serverURL: String?
    let migrations: URL
    let log: @Sendable (String) -> Void

    public init(
        events: Int, days: Int = 30, laterUse: LaterUse = LaterUse(), rounds: Int = 3, executable: String, serverURL: String?, migrations: URL,
        log: @escaping @Sendable (String) -> Void
    ) {
        self.events = events
        self.days = days
        self.laterUse = laterUse
        self.rounds = max(1, rounds)
        self.executable = executable
        self.serverURL = serverURL
        self.migrations = migrations
        self.log = log
    }

    public func run() async throws -> Result {
        let configFile = FileManager.default.temporaryDirectory.appendingPathComponent("bench-audiences-\(UUID().uuidString).yaml")
        defer { try? FileManager.default.removeItem(at: configFile) }
        guard let bundled = try? String(contentsOf: Self.defaultFunnels(), encoding: .utf8) else {
            throw BenchError("cannot read the shipped funnels (Sources/Funnels/Resources/default-funnels.yaml)")
        }
        try (bundled + Self.audiences).write(to: configFile, atomically: true, encoding: .utf8)
        return try await BenchDatabase.with(serverURL: serverURL, migrations: migrations) { try await run(on: $0, config: configFile.path) }
    }

    /// The shipped funnels' file, in the checkout the benchmark was built from.
    static func defaultFunnels() -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/Funnels/Resources/default-funnels.yaml")
    }

    private func run(on database: BenchDatabase, config: String) async throws -> Result {
        let now = Date()
        let historyStart = now.addingTimeInterval(-Double(days + 1) * 86_400)
        let dayStart = now.addingTimeInterval(-86_400), tenMinutes = now.addingTimeInterval(-600)
        let generated = events + events / days
        let laterUse = self.laterUse
        func append(_ url: String, _ kept: Range<Date>, receivedAt: Date) async throws -> Int {
            try await ConnectionPool.using(url: url) { pool in
                let written = try await pool.withConnection { c in
                    try LogWriter.append(
                        c, count: generated, from: historyStart, to: now, seed: 1, prefix: "h", laterUse: laterUse, kept: kept,
                        receivedAt: receivedAt)
                }
                try await pool.query("VACUUM ANALYZE events")
                try await pool.query("CHECKPOINT")
                return written
            }
        }
        log("writing about \(events) events over \(days) days with COPY …")
        let written = try await append(database.url, historyStart..<dayStart, receivedAt: dayStart)
        // The two states the nights start from: rebuilt without audiences, and with them.
        let plain = try await database.copy("aud_plain"), kept = try await database.copy("aud_kept")
        var dayEvents = 0, tenMinuteEvents = 0
        var nights: [(Double, Double)] = [], quiet: [Double] = [], tenMinuteRuns: [Double] = []
        var rss = 0
        var members: [String: Int] = [:]
        do {
            log("rebuilding without and with the five audiences …")
            _ = try timed(["rebuild", "--quiet", "--format", "json"], plain, config: nil)
            _ = try timed(["rebuild", "--quiet", "--format", "json"], kept, config: config)
            for round in 1...rounds {
                log("round \(round)/\(rounds): the night without and with audiences, a quiet audiences run, ten minutes' traffic …")
                let a = try await database.copy("aud_a", of: "aud_plain"), b = try await database.copy("aud_b", of: "aud_kept")
                dayEvents = try await append(a, dayStart..<tenMinutes, receivedAt: tenMinutes)
                _ = try await append(b, dayStart..<tenMinutes, receivedAt: tenMinutes)
                let without = try timed(["report", "--quiet", "--format", "json"], a, config: nil)
                let with = try timed(["report", "--quiet", "--format", "json"], b, config: config)
                nights.append((without.seconds, with.seconds))
                quiet.append(try timed(["audiences", "run"], b, config: config).seconds)
                tenMinuteEvents = try await append(b, tenMinutes..<now.addingTimeInterval(1), receivedAt: now)
                let recent = try timed(["audiences", "run"], b, config: config)
                tenMinuteRuns.append(recent.seconds)
                rss = max(rss, recent.maxResidentKilobytes)
                members = try await ConnectionPool.using(url: b) { pool in
                    var counted: [String: Int] = [:]
                    for row in try await pool.query("SELECT audience, members FROM analytics.audiences").rows {
                        counted[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1)
                    }
                    return counted
                }
                for suffix in ["aud_a", "aud_b"] { try await database.dropCopy(suffix) }
            }
        } catch {
            for suffix in ["aud_a", "aud_b", "aud_plain", "aud_kept"] { try? await database.dropCopy(suffix) }
            throw error
        }
        for suffix in ["aud_plain", "aud_kept"] { try await database.dropCopy(suffix) }
        let ratios = nights.map { $0.1 / max($0.0, 1e-9) }
        return Result(
            events: written, days: days, rounds: rounds, dayEvents: dayEvents, tenMinuteEvents: tenMinuteEvents,
            nightSeconds: ReportBenchmark.median(nights.map(\.0)), nightWithAudiencesSeconds: ReportBenchmark.median(nights.map(\.1)),
            nightRatio: ReportBenchmark.median(ratios), nightRatios: ratios, quietRunSeconds: ReportBenchmark.median(quiet),
            quietRunSamples: quiet, tenMinuteRunSeconds: ReportBenchmark.median(tenMinuteRuns), tenMinuteRunSamples: tenMinuteRuns,
            tenMinutePeakRSSMegabytes: Double(rss) / 1024, members: members)
    }

    /// `onramp ARGUMENTS --database-url URL [--config FILE]`, timed as a whole process.
    private func timed(_ arguments: [String], _ url: String, config: String?) throws -> ChildProcess.Exit {
        let run = try ChildProcess.run([executable] + arguments + ["--database-url", url] + (config.map { ["--config", $0] } ?? []))
        guard run.exit.status == 0 else { throw BenchError("\(arguments[0]) failed: \(run.output.suffix(2000))") }
        return run.exit
    }
}
