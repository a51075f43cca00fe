public import EventLog
public import Foundation
public import Logging

/// Everything `buildApplication` needs; `onramp serve` fills it from flags,
/// the tests from their own values.
public struct IngestConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port (tests); `onServerRunning` learns which.
    public var port = 8080
    public var databaseURL: String
    public var poolSize = 8
    /// Concurrent group-commit writers (each holds a pool connection while it commits).
    public var writers = 2
    /// Validation limits and per-app PII settings.
    public var policy = IngestPolicy()
    /// Largest request body, before and after gzip decompression.
    public var maxBodyBytes = 512 * 1024
    /// A connection must send a whole request head within this, and may stay idle between requests this long.
    public var idleTimeout: Duration = .seconds(30)
    /// A request's whole body must arrive within this (else 408).
    public var bodyTimeout: Duration = .seconds(30)
    /// A request the ingest routes refuse (a 4xx other than 429) is answered
    /// no sooner than this after it arrived: see `IngestController.pacingRefusals`.
    public var refusalPause: Duration = .seconds(1)
    /// Requests that may wait for a commit before new ones get 503.
    public var maxQueuedRequests = 4_096
    /// Per-key token bucket: requests a second and burst size.
    public var rateLimitPerSecond: Double = 500
    public var rateLimitBurst: Double = 1_000
    /// How long the writer fails fast after losing the database.
    public var databaseBackoff: Duration = .seconds(1)
    /// How long a request waits for its commit to be confirmed before it is
    /// answered 503: PostgreSQL may hang without refusing anything.
    public var commitTimeout: Duration = .seconds(30)
    /// Migrations the readiness check compares with the database (nil: look them up
    /// as `onramp migrate` does; if none are found, readiness checks only the connection).
    public var migrationsDirectory: URL?
    /// How often partitions for coming months are ensured.
    public var partitionMaintenanceInterval: Duration = .seconds(86_400)
    /// The public address and the proxies whose `X-Forwarded-*` headers are believed.
    public var forwarding = Forwarding()
    /// One `onramp.access` log line per request.
    public var accessLog = true
    /// How long a write key's revocation or origin change may take to reach
    /// this server (the key lookups' cache, `WriteKeyStore`).
    public var keyCacheTTL: Duration = .seconds(5)
    public var logger = Logger(label: "onramp.serve")
    /// Called with the bound port once the server listens.
    public var onServerRunning: (@Sendable (Int) async -> Void)?
    /// Where `/metrics` is served (docs/ingestion.md, "Metrics"): on the
    /// API's own port (the in-process tests and benchmarks), on a listener
    /// of its own, which `onramp serve` keeps on loopback by default (the
    /// series name the apps, which are not for the internet), or nowhere.
    public var metricsEndpoint = MetricsEndpoint.apiPort

    public enum MetricsEndpoint: Sendable, Equatable {
        case apiPort
        case listener(MetricsListen)
        case off
    }
    /// Called with the metrics listener's bound port once it listens.
    public var onMetricsRunning: (@Sendable (Int) async -> Void)?

    /// A host and port for `/metrics` alone (0 picks a free port).
    public struct MetricsListen: Sendable, Equatable {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// `HOST:PORT` (`[v6]:PORT` for an IPv6 address), or nil when it is not one.
        public init?(_ text: String) {
            guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65_535).contains(port)
            else { return nil }
            var host = String(text[..<colon])
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty else { return nil }
            self.init(host: host, port: port)
        }
    }

    public init(databaseURL: String) {
        self.databaseURL = databaseURL
    }
}

/// A setting `onramp serve` cannot run with, named with what it needs.
public struct IngestConfigurationError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

extension IngestConfiguration {
    /// The pool must keep a connection beside its writers, for key lookups
    /// and readiness (`onramp serve` and `onramp-bench ingest` run the same server).
    public static func checkPool(writers: Int, poolSize: Int) throws(IngestConfigurationError) {
        guard poolSize >= 2 else { throw IngestConfigurationError(description: "--pool-size must be at least 2") }
        guard writers >= 1, writers < poolSize else {
            throw IngestConfigurationError(
                description: "--writers must be 1…\(poolSize - 1): the pool needs a connection left for key lookups and readiness")
        }
    }
}
