public import Foundation
import AsyncHTTPClient
import EventLog
import Hummingbird
import IngestServer
import LibPQ
import LocalPostgres
import Logging
import NIOCore
import ServiceLifecycle
#if canImport(Glibc)
import Glibc
#endif

/// `onramp-bench ingest`: the ingestion server against this machine's write limit.
///
/// On a fresh database it first measures the physical limit (RawCopy: the same
/// messages COPYed into `event_ids` and `events`, one durable transaction per
/// chunk), then starts the real server in-process (`buildApplication`, on
/// 127.0.0.1, port 0) and drives it with `LoadGenerator` for each case (batch
/// size B × clients N): a warm-up, then a fixed measured window. The result is
/// the ratio of the two rates, measured in the same run; absolute figures on a
/// shared machine are noise. For a sweep the COPY limit is measured again at
/// the end (the table has grown) and the mean of both is the baseline.
public struct IngestBenchmark: Sendable {
    public struct Case: Sendable, Codable, Hashable {
        public var batchSize: Int
        public var clients: Int
        public init(batchSize: Int, clients: Int) {
            self.batchSize = batchSize
            self.clients = clients
        }
    }

    public struct CaseResult: Sendable, Codable {
        public var batchSize: Int
        public var clients: Int
        public var requests: Int
        public var messages: Int
        public var failures: Int
        /// Messages the server answered for but put in quarantine (should be 0).
        public var rejectedMessages: Int
        public var seconds: Double
        public var messagesPerSecond: Double
        public var megabytesPerSecond: Double
        public var latencyP50Ms: Double
        public var latencyP99Ms: Double
        public var latencyMaxMs: Double
        /// Group commits in the window, and their mean size in requests and messages.
        public var commits: Int
        public var requestsPerCommit: Double
        public var messagesPerCommit: Double
        public var commitMeanMs: Double
        /// CPU used in the window, in cores: this process (server + load generator) and PostgreSQL.
        public var benchProcessCores: Double
        public var postgresCores: Double
        /// Server messages/s ÷ raw COPY messages/s.
        public var ratioToCopy: Double
    }

    public struct Result: Sendable, Codable {
        public var database: String
        public var writers: Int
        public var averageMessageBytes: Double
        public var copyMessagesPerSecond: Double
        public var copyMegabytesPerSecond: Double
        public var copyRuns: [RawCopyFigures]
        public var cases: [CaseResult]
    }

    public struct RawCopyFigures: Sendable, Codable {
        public var messages: Int
        public var seconds: Double
        public var chunkSize: Int
        public var messagesPerSecond: Double
        public var postgresCores: Double
        public var benchProcessCores: Double
    }

    public var cases: [Case]
    public var duration: Duration
    public var warmUp: Duration
    public var copyChunkSize: Int
    public var serverURL: String?
    public var migrations: URL
    public var poolSize: Int
    /// The server's group-commit writers.
    public var writers: Int
    /// Persons suppressed (and 20 message ids each erased) before the server starts.
    public var erasedPersons: Int
    public var log: @Sendable (String) -> Void

    public init(
        cases: [Case], duration: Duration, warmUp: Duration, copyChunkSize: Int = 5_000, serverURL: String?, migrations: URL,
        poolSize: Int = 8, writers: Int = 2, erasedPersons: Int = 0, log: @escaping @Sendable (String) -> Void
    ) {
        self.erasedPersons = erasedPersons
        self.cases = cases
        self.duration = duration
        self.warmUp = warmUp
        self.copyChunkSize = copyChunkSize
        self.serverURL = serverURL
        self.migrations = migrations
        self.poolSize = poolSize
        self.writers = writers
        self.log = log
    }

    public func run() async throws -> Result {
        try await BenchDatabase.with(serverURL: serverURL, migrations: migrations) { try await run(on: $0) }
    }

    private func run(on database: BenchDatabase) async throws -> Result {
        let factory = MessageFactory(devicePrefix: "bench")
        let postmaster = CPUUsage.postmaster(of: database.cluster)
        let messageBytes = factory.averageMessageBytes()

        var copies: [RawCopyFigures] = []
        copies.append(try await rawCopy(database.url, factory, prefix: "copy0", postmaster: postmaster))

        if erasedPersons > 0 { try await keepOut(database.url) }

        var configuration = IngestConfiguration(databaseURL: database.url)
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.poolSize = poolSize
        configuration.writers = writers
        configuration.rateLimitPerSecond = 1e9
        configuration.rateLimitBurst = 1e9
        configuration.maxQueuedRequests = 65_536
        configuration.migrationsDirectory = migrations
        var logger = Logger(label: "onramp.bench.serve")
        logger.logLevel = .error
        configuration.logger = logger
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
        configuration.onServerRunning = { port in
            portSink.yield(port)
            portSink.finish()
        }
        let app = try await buildApplication(configuration: configuration)
        // Stopped as SIGTERM stops `onramp serve`, by a graceful shutdown: a
        // cancelled server logs the cancellation as an error.
        let services = ServiceGroup(configuration: .init(services: [app], logger: logger))
        let server = Task { try await services.run() }
        var port = 0
        for await p in ports { port = p }
        let base = "http://127.0.0.1:\(port)"
        let keyPool = ConnectionPool(url: database.url, maxConnections: 1)
        let key = try await WriteKeyStore(pool: keyPool).create(app: "yoked")
        await keyPool.close()
        log("server listening on \(base)")

        let client = LoadGenerator.makeClient(connections: (cases.map(\.clients).max() ?? 1) + 1)
        var results: [CaseResult] = []
        do {
            for (index, c) in cases.enumerated() {
                log("B=\(c.batchSize) N=\(c.clients): \(warmUp.seconds) s warm-up, \(duration.seconds) s measured …")
                let generator = LoadGenerator(
                    url: base, writeKey: key, clients: c.clients, batchSize: c.batchSize, factory: factory, idPrefix: "h\(index)")
                let before = try await Self.scrape(client, base)
                // CPU is sampled around the whole run (warm-up included), then scaled to the window.
                let cpuBefore = CPUUsage.sample(postmaster: postmaster)
                let load = try await generator.run(client: client, warmUp: warmUp, duration: duration)
                let cpuAfter = CPUUsage.sample(postmaster: postmaster)
                let after = try await Self.scrape(client, base)
                let wall = warmUp.seconds + load.seconds
                let commits = Int(after["onramp_group_commit_requests_count"] - before["onramp_group_commit_requests_count"])
                let groupRequests = after["onramp_group_commit_requests_sum"] - before["onramp_group_commit_requests_sum"]
                let accepted = after.messages("accepted") - before.messages("accepted")
                let commitSeconds = after["onramp_commit_duration_seconds_sum"] - before["onramp_commit_duration_seconds_sum"]
                let rate = Double(load.messages) / load.seconds
                results.append(
                    CaseResult(
                        batchSize: c.batchSize, clients: c.clients, requests: load.requests, messages: load.messages,
                        failures: load.failures,
                        rejectedMessages: Int(
                            after.messages("rejected") - before.messages("rejected")),
                        seconds: load.seconds, messagesPerSecond: rate,
                        megabytesPerSecond: Double(load.bodyBytes) / load.seconds / 1_048_576,
                        latencyP50Ms: load.percentile(50), latencyP99Ms: load.percentile(99), latencyMaxMs: load.latenciesMs.last ?? 0,
                        commits: commits, requestsPerCommit: commits > 0 ? groupRequests / Double(commits) : 0,
                        messagesPerCommit: commits > 0 ? accepted / Double(commits) : 0,
                        commitMeanMs: commits > 0 ? commitSeconds / Double(commits) * 1_000 : 0,
                        benchProcessCores: (cpuAfter.own - cpuBefore.own) / wall,
                        postgresCores: cpuAfter.postgres(since: cpuBefore) / wall, ratioToCopy: 0))
                log(
                    String(
                        format: "  %.0f messages/s, p99 %.1f ms, %.1f requests/commit", rate, load.percentile(99),
                        results.last?.requestsPerCommit ?? 0))
            }
        } catch {
            try? await client.shutdown()
            await services.triggerGracefulShutdown()
            _ = try? await server.value
            throw error
        }
        try? await client.shutdown()
        await services.triggerGracefulShutdown()
        _ = try? await server.value

        let quarantinePool = ConnectionPool(url: database.url, maxConnections: 1)
        let reasons = try await quarantinePool.query(
            "SELECT reason_code || ': ' || min(reason) || ' (' || count(*) || ')' FROM quarantine GROUP BY reason_code")
        await quarantinePool.close()
        for row in reasons.rows { log("quarantined: \(row.text(at: 0) ?? "")") }
        if cases.count > 1 {
            copies.append(try await rawCopy(database.url, factory, prefix: "copy1", postmaster: postmaster))
        }
        let copyRate = copies.map(\.messagesPerSecond).reduce(0, +) / Double(copies.count)
        for i in results.indices { results[i].ratioToCopy = results[i].messagesPerSecond / copyRate }
        return Result(
            database: database.cluster == nil ? "DATABASE_URL server" : "private durable cluster (fsync on)", writers: writers,
            averageMessageBytes: messageBytes, copyMessagesPerSecond: copyRate,
            copyMegabytesPerSecond: copyRate * messageBytes / 1_048_576, copyRuns: copies, cases: results)
    }

    /// `erasedPersons` made-up persons of the bench's app, suppressed, with
    /// 20 erased message ids each, erased a day before: the privacy checks
    /// of every append then run.
    private func keepOut(_ url: String) async throws {
        try await ConnectionPool.using(url: url) { [erasedPersons] pool in
            try await pool.transaction { c in
                let request = try c.query(
                    "INSERT INTO privacy_requests (kind, app, requested_by, id_hashes, suppressed) VALUES ('erase', 'yoked', 'bench', '{}', true) RETURNING id"
                ).scalar(Int64.self)
                try c.query(
                    """
                    INSERT INTO suppressed_ids (app, id_hash, request_id)
                    SELECT 'yoked', onramp_keyed_hash('yoked', 'user', 'erased-' || g), $1 FROM generate_series(1, $2::int) g
                    """, [.int(request), .int(Int64(erasedPersons))])
                try c.query(
                    """
                    INSERT INTO erased_messages (app, message_hash, request_id)
                    SELECT 'yoked', onramp_keyed_hash('yoked', 'message', 'erased-' || g), $1 FROM generate_series(1, 20 * $2::int) g
                    """, [.int(request), .int(Int64(erasedPersons))])
                // Erased a day ago: the bench's messages, sent up to 20 hours late, are later.
                try c.query("INSERT INTO erased_horizon (app, original_until) VALUES ('yoked', now() - interval '1 day')")
            }
        }
    }

    private func rawCopy(_ url: String, _ factory: MessageFactory, prefix: String, postmaster: Int32?) async throws -> RawCopyFigures {
        log("raw COPY limit (\(copyChunkSize)-row transactions, \(duration.seconds) s) …")
        let r = try await RawCopy.run(
            url: url, factory: factory, duration: duration, chunkSize: copyChunkSize, idPrefix: prefix, postmaster: postmaster)
        log(String(format: "  %.0f messages/s", r.messagesPerSecond))
        return RawCopyFigures(
            messages: r.messages, seconds: r.seconds, chunkSize: r.chunkSize, messagesPerSecond: r.messagesPerSecond,
            postgresCores: r.postgresCPUSeconds / r.seconds, benchProcessCores: r.ownCPUSeconds / r.seconds)
    }

    /// The server's Prometheus metrics, as sample name (with labels) → value.
    static func scrape(_ client: HTTPClient, _ base: String) async throws -> MetricsSample {
        let response = try await client.execute(HTTPClientRequest(url: base + "/metrics"), timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 8 << 20)
        var values: [String: Double] = [:]
        for line in String(buffer: body).split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            values[String(line[..<space])] = value
        }
        return MetricsSample(values: values)
    }

    struct MetricsSample {
        let values: [String: Double]
        subscript(_ name: String) -> Double { values[name] ?? 0 }

        /// `onramp_messages_total` of `outcome`, every app's together.
        func messages(_ outcome: String) -> Double {
            values.filter { $0.key.hasPrefix("onramp_messages_total{") && $0.key.hasSuffix("outcome=\"\(outcome)\"}") }.values.reduce(0, +)
        }
    }
}

/// CPU time (seconds) of this process and of PostgreSQL, from /proc: the
/// postmaster and its children when its pid is known (the private cluster),
/// else every `postgres` process on the machine.
enum CPUUsage {
    /// The private cluster's postmaster, read from its `postmaster.pid`.
    static func postmaster(of cluster: LocalCluster?) -> Int32? {
        guard let cluster else { return nil }
        let file = cluster.directory.appendingPathComponent("data/postmaster.pid").path
        return (try? String(contentsOfFile: file, encoding: .utf8))?.split(separator: "\n").first.flatMap { Int32($0) }
    }

    struct Sample {
        var own: Double
        /// CPU seconds of each PostgreSQL process alive at the sample.
        var postgresByPID: [Int32: Double]

        /// PostgreSQL CPU seconds since `earlier`, process by process: a backend
        /// that exited in between (a closed pool's) must not count as negative.
        func postgres(since earlier: Sample) -> Double {
            postgresByPID.reduce(0) { $0 + $1.value - (earlier.postgresByPID[$1.key] ?? 0) }
        }
    }

    static func sample(postmaster: Int32?) -> Sample {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var own = 0.0
        var postgres: [Int32: Double] = [:]
        let me = ProcessInfo.processInfo.processIdentifier
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8) else { continue }
            guard let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { continue }
            let name = stat[stat.index(after: open)..<close]
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            // After "(comm)": state is field 0, utime field 11, stime field 12.
            guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
            if pid == me { own = (user + system) / ticks }
            let parent = Int32(fields[1])
            let ours = postmaster.map { pid == $0 || parent == $0 } ?? true
            if name == "postgres" && ours { postgres[pid] = (user + system) / ticks }
        }
        return Sample(own: own, postgresByPID: postgres)
    }
}
