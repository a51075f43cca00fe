import ArgumentParser
import Explore
import ExploreServer
import Foundation
import Funnels
import Hummingbird
import Logging

/// `onramp explore`: the explorer, a web page that answers any funnel while
/// the analyst builds it (docs/explore.md).
struct ExploreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explore",
        abstract: "Serve the funnel explorer: build any funnel in a browser and see it answered (docs/explore.md).",
        discussion: """
            It reads only the analytics schema, so --database-url may be onramp_analyst's, on a replica. \
            It listens on 127.0.0.1 by default; on any other address it needs --token (or --behind-proxy, \
            when the operator's proxy authenticates). Open http://HOST:PORT/?token=TOKEN once: the page \
            keeps the token in a cookie.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var configuration: ConfigurationOptions

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on (0 picks a free one).")
    var port = 8090

    @Option(help: "A token every request must carry (default: $ONRAMP_EXPLORE_TOKEN); at least 16 letters, digits, '-', '_' or '.'.")
    var token: String?

    @Flag(help: "Serve on a non-loopback address without a token: an authenticating proxy stands in front.")
    var behindProxy = false

    @Option(help: "Queries at once, each on a database connection of its own.")
    var connections = 4

    @Option(help: "Give a query up after this many seconds, reading included.")
    var timeout: Double = 300

    @Option(help: "Where each app's event columns are kept (default: $ONRAMP_EXPLORE_CACHE, else ~/.cache/onramp/explore).")
    var cache: String?

    var resolvedToken: String? {
        token ?? ProcessInfo.processInfo.environment["ONRAMP_EXPLORE_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
    }

    func validate() throws {
        if let token = resolvedToken, !ExploreConfiguration.isAcceptableToken(token) {
            throw ValidationError("--token must be at least 16 letters, digits, '-', '_' or '.' (e.g. from `openssl rand -hex 16`)")
        }
        if !ExploreConfiguration.isLoopback(host), resolvedToken == nil, !behindProxy {
            throw ValidationError(
                "--host \(host) is reachable from other machines: give --token (or $ONRAMP_EXPLORE_TOKEN), or --behind-proxy when a proxy authenticates")
        }
        guard (1...64).contains(connections) else { throw ValidationError("--connections must be 1 to 64 (got \(connections))") }
        guard timeout > 0, timeout <= 86_400 else {
            throw ValidationError("--timeout must be a number of seconds above 0, at most a day (got \(timeout))")
        }
    }

    func run() async throws {
        let configured = try configuration.load()
        var settings = ExploreConfiguration(
            databaseURL: try database.resolvedURL(), cacheRoot: cache.map { URL(fileURLWithPath: $0) } ?? Explorer.defaultCacheRoot)
        settings.host = host
        settings.port = port
        settings.token = resolvedToken
        settings.connections = connections
        settings.timeoutSeconds = timeout
        settings.keepingPaths = configured.referencedPaths
        settings.defaultTimeZone = configured.reportTimeZone ?? "UTC"
        for app in configured.apps { settings.timeZones[app.name] = app.timeZone }
        var logger = Logger(label: "onramp.explore")
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        settings.logger = logger
        let app = try buildExploreApplication(configuration: settings)
        try await app.runService()
    }
}
