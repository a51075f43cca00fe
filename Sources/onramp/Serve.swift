import ArgumentParser
import EventLog
import Foundation
import Funnels
import Hummingbird
import IngestServer
import Logging

/// `onramp serve`: the Segment-compatible ingestion service.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Accept Segment-style events over HTTP and append them to the event log exactly once.")

    @OptionGroup var database: DatabaseOptions

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on (0 picks a free one).")
    var port = 8080

    /// Per-app PII lists and modes come from the funnel configuration.
    @OptionGroup var funnels: ConfigurationOptions

    @Option(help: "Database connections for the writer and lookups.")
    var poolSize = 8

    @Option(help: "Concurrent group-commit writers, each using one of the pool's connections while it commits.")
    var writers = 2

    @Option(help: "Per-write-key rate limit, requests per second.")
    var rateLimit: Double = 500

    @Option(help: "Oldest accepted event, in days before the receive time.")
    var horizonDays = 30

    @Option(help: "Seconds a request waits for its commit to be confirmed before it gets 503 with Retry-After.")
    var commitTimeout = 30

    @Option(help: "Seconds a connection may take to send a request head, or stay idle between requests.")
    var idleTimeout = 30

    @Option(help: "Seconds a request's body may take to arrive (else 408).")
    var bodyTimeout = 30

    @Option(help: "Seconds after its arrival before a refused ingest request (a 4xx other than 429) is answered; 0 answers at once.")
    var refusalPause = 1.0

    @Option(help: ArgumentHelp(
        "The URL clients reach this server at (e.g. https://onramp.example.com), advertised as apiHost in the SDK settings document.",
        valueName: "url"))
    var publicURL: String?

    @Option(help: ArgumentHelp(
        "A proxy (IP or CIDR, repeatable) whose X-Forwarded-For/-Host/-Proto headers are believed.", valueName: "cidr"))
    var trustedProxy: [String] = []

    @Option(help: "Seconds a revoked write key or a changed origin may still be honoured (the key lookups' cache).")
    var keyCacheSeconds: Double = 5

    @Flag(inversion: .prefixedNo, help: "One log line per request (onramp.access): method, path, status, key prefix, counts, bytes, duration, client.")
    var accessLog = true

    @Option(help: ArgumentHelp(
        "Where Prometheus scrapes /metrics, apart from the API: HOST:PORT (port 0 picks a free one), or off.", valueName: "host:port"))
    var metricsListen = "127.0.0.1:9474"

    /// `--metrics-listen`, checked.
    func metricsEndpoint() throws -> IngestConfiguration.MetricsEndpoint {
        guard metricsListen != "off" else { return .off }
        guard let listen = IngestConfiguration.MetricsListen(metricsListen) else {
            throw ValidationError("--metrics-listen must be HOST:PORT, such as 127.0.0.1:9474, or off (got '\(metricsListen)')")
        }
        return .listener(listen)
    }

    func validate() throws {
        _ = try forwarding()
        _ = try metricsEndpoint()
        do { try IngestConfiguration.checkPool(writers: writers, poolSize: poolSize) } catch { throw ValidationError(error.description) }
        guard idleTimeout >= 1, bodyTimeout >= 1 else {
            throw ValidationError("--idle-timeout and --body-timeout must be at least 1 second")
        }
        guard refusalPause >= 0, refusalPause <= 60 else {
            throw ValidationError("--refusal-pause must be between 0 and 60 seconds (got \(refusalPause))")
        }
        guard keyCacheSeconds >= 0, keyCacheSeconds <= 3_600 else {
            throw ValidationError("--key-cache-seconds must be between 0 and 3600 (got \(keyCacheSeconds))")
        }
        guard commitTimeout >= 1 else { throw ValidationError("--commit-timeout must be at least 1 second (got \(commitTimeout))") }
    }

    /// `--public-url` and `--trusted-proxy`, checked.
    func forwarding() throws -> Forwarding {
        var result = Forwarding()
        if let publicURL {
            guard let url = URL(string: publicURL), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
                  url.host?.isEmpty == false, url.query == nil
            else {
                throw ValidationError("--public-url '\(publicURL)': expected http(s)://host[:port][/path], e.g. https://onramp.example.com")
            }
            result.publicURL = url
        }
        do {
            result.trustedProxies = try trustedProxy.map { text throws(IngestConfigurationError) in try IPNetwork(text) }
        } catch {
            throw ValidationError(error.description)
        }
        return result
    }

    func run() async throws {
        var logger = Logger(label: "onramp.serve")
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        var configuration = IngestConfiguration(databaseURL: try database.resolvedURL())
        configuration.host = host
        configuration.port = port
        configuration.poolSize = poolSize
        configuration.writers = writers
        configuration.rateLimitPerSecond = rateLimit
        configuration.rateLimitBurst = max(1, rateLimit * 2)
        configuration.commitTimeout = .seconds(commitTimeout)
        configuration.policy = IngestPolicy(funnels: try funnels.load())
        configuration.policy.horizonSeconds = Int64(horizonDays) * 86_400
        configuration.idleTimeout = .seconds(idleTimeout)
        configuration.bodyTimeout = .seconds(bodyTimeout)
        configuration.refusalPause = .milliseconds(Int64((refusalPause * 1000).rounded()))
        configuration.forwarding = try forwarding()
        configuration.accessLog = accessLog
        configuration.keyCacheTTL = .milliseconds(Int64((keyCacheSeconds * 1000).rounded()))
        configuration.logger = logger
        configuration.metricsEndpoint = try metricsEndpoint()
        let app = try await buildApplication(configuration: configuration)
        try await app.runService()  // SIGTERM/SIGINT: graceful shutdown, then exit 0
    }
}
