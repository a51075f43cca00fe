import Access
public import Foundation
import LibPQ
import LocalPostgres
import Simulation

/// `onramp-bench access` (BENCHMARKS.md, "`onramp-bench access`"): what the grants
/// cost a login. Over a generated history folded by `onramp report`, every
/// sql/examples query and the explorer's first query (a fresh `onramp
/// funnel`, its store read from the log) run interleaved as `onramp_analyst`
/// (every app, by its every-app grant), as a login granted the four apps one
/// by one, and as a login granted the one app the query reads, against the
/// analyst running the same query, which reads that app alone.
public struct AccessBenchmark: Sendable {
    public struct Timing: Sendable, Codable {
        public var query: String
        /// The app the query reads, when it reads one: the one-app login's.
        public var app: String?
        public var analystSeconds: Double
        public var fourAppsSeconds: Double
        public var oneAppSeconds: Double?
        public var fourAppsRatio: Double { fourAppsSeconds / analystSeconds }
        public var oneAppRatio: Double? { oneAppSeconds.map { $0 / analystSeconds } }
    }

    public struct Result: Sendable, Codable {
        public var events: Int
        public var rounds: Int
        /// Medians of the rounds, per query.
        public var timings: [Timing]
        /// Sums of the medians over the queries each ratio covers.
        public var fourAppsRatio: Double
        public var oneAppRatio: Double
    }

    public var events: Int
    public var rounds: Int
    public var executable: String
    public var serverURL: String?
    public var migrations: URL
    public var examples: URL
    public var log: @Sendable (String) -> Void

    public init(
        events: Int, rounds: Int, executable: String, serverURL: String?, migrations: URL, examples: URL,
        log: @escaping @Sendable (String) -> Void
    ) {
        self.events = events
        self.rounds = max(1, rounds)
        self.executable = executable
        self.serverURL = serverURL
        self.migrations = migrations
        self.examples = examples
        self.log = log
    }

    public func run() async throws -> Result {
        try await BenchDatabase.with(serverURL: serverURL, migrations: migrations) { try await run(on: $0) }
    }

    /// The app an example reads: the one its name starts with after the number.
    static func app(of file: String) -> String? {
        let words = file.split(separator: "_")
        return words.count > 1 && ["yoked", "ops", "umuve", "forma"].contains(String(words[1])) ? String(words[1]) : nil
    }

    private func run(on database: BenchDatabase) async throws -> Result {
        let owner = try Connection.connect(database.url)
        let now = Date()
        log("writing about \(events) events over 30 days, then the nightly job …")
        _ = try LogWriter.append(owner, count: events, from: now.addingTimeInterval(-30 * 86_400), to: now, seed: 1, prefix: "h", laterUse: LaterUse())
        try owner.query("VACUUM ANALYZE events")
        let report = try ChildProcess.run([executable, "report", "--database-url", database.url, "--format", "json"])
        guard report.exit.status == 0 || report.exit.status == 3 else { throw BenchError("onramp report failed: \(report.output.suffix(2000))") }
        let apps = try owner.query("SELECT DISTINCT app FROM events ORDER BY 1").rows.compactMap { $0.text(at: 0) }
        let tag = String(UUID().uuidString.prefix(6)).lowercased()
        let fourApps = "bench_four_\(tag)"
        try AppGrants.createLogin(owner, name: fourApps, password: "bench", .apps(apps))
        for app in apps { try AppGrants.createLogin(owner, name: "bench_\(app)_\(tag)", password: "bench", .apps([app])) }
        defer {
            for login in [fourApps] + apps.map({ "bench_\($0)_\(tag)" }) { _ = try? owner.query("DROP ROLE \"\(login)\"") }
        }
        func url(_ login: String) throws -> String { try TestDatabase.url(database.url, as: login) }
        let connections = try Dictionary(uniqueKeysWithValues: (["onramp_analyst", fourApps] + apps.map { "bench_\($0)_\(tag)" }).map {
            ($0, try Connection.connect(try url($0)))
        })
        // Each example's text, read once; the operator's is not the analysts'.
        let texts = try Dictionary(uniqueKeysWithValues: FileManager.default.contentsOfDirectory(atPath: examples.path)
            .filter { $0.hasSuffix(".sql") }.map { ($0, try String(contentsOf: examples.appendingPathComponent($0), encoding: .utf8)) })
            .filter { !$0.value.hasPrefix("-- role: onramp_operator") }
        let files = texts.keys.sorted()
        // The explorer's first query, a fresh process and a fresh store each time.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("onramp-access-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        func explore(as login: String) throws -> Double {
            let cache = scratch.appendingPathComponent(UUID().uuidString)
            let run = try ChildProcess.run([
                executable, "funnel", "--app", "yoked", "--step", "onboarding_started", "--step", "otp_verified",
                "--database-url", try url(login), "--cache", cache.path, "--format", "json", "--quiet",
            ])
            guard run.exit.status == 0 else { throw BenchError("onramp funnel as \(login) failed: \(run.output.suffix(2000))") }
            try? FileManager.default.removeItem(at: cache)
            return run.exit.seconds
        }
        var samples: [String: [String: [Double]]] = [:]
        let queries = files + ["explorer: first query (yoked)"]
        for round in 0..<rounds {
            log("round \(round + 1) of \(rounds) …")
            for query in queries {
                let app = query.hasPrefix("explorer") ? "yoked" : Self.app(of: query)
                var roles = ["onramp_analyst", fourApps] + (app.map { ["bench_\($0)_\(tag)"] } ?? [])
                // Interleaved: each round starts with another role.
                roles = Array(roles[(round % roles.count)...] + roles[..<(round % roles.count)])
                for role in roles {
                    let seconds: Double
                    if query.hasPrefix("explorer") {
                        seconds = try explore(as: role)
                    } else {
                        let started = ContinuousClock.now
                        try connections[role]?.query(texts[query] ?? "")
                        seconds = (ContinuousClock.now - started).seconds
                    }
                    let key = role == "onramp_analyst" ? "analyst" : role == fourApps ? "four" : "one"
                    samples[query, default: [:]][key, default: []].append(seconds)
                }
            }
        }
        let median = ReportBenchmark.median
        let timings = queries.map { query in
            let s = samples[query] ?? [:]
            return Timing(
                query: query, app: query.hasPrefix("explorer") ? "yoked" : Self.app(of: query), analystSeconds: median(s["analyst"] ?? []),
                fourAppsSeconds: median(s["four"] ?? []), oneAppSeconds: s["one"].map(median))
        }
        let withOne = timings.filter { $0.oneAppSeconds != nil }
        return Result(
            events: try owner.query("SELECT count(*) FROM events").scalar(Int.self), rounds: rounds, timings: timings,
            fourAppsRatio: timings.map(\.fourAppsSeconds).reduce(0, +) / timings.map(\.analystSeconds).reduce(0, +),
            oneAppRatio: withOne.compactMap(\.oneAppSeconds).reduce(0, +) / withOne.map(\.analystSeconds).reduce(0, +))
    }
}
