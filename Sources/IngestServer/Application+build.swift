import EventLog
public import Hummingbird
import LibPQ
import Logging
import Migrations
import NIOCore
import ServiceLifecycle

/// Builds the ingestion application: what `onramp serve` runs and the tests test.
///
/// Its services (the group-commit writer, partition upkeep, the pool's closer)
/// run in the application's `ServiceGroup`; on SIGTERM/SIGINT the HTTP server
/// stops accepting and finishes its requests first, then the writer commits
/// and answers whatever is still queued, then the pool closes.
public func buildApplication(configuration: IngestConfiguration) async throws -> some ApplicationProtocol {
    let logger = configuration.logger
    let pool = ConnectionPool(
        ConnectionPool.Configuration(
            conninfo: configuration.databaseURL, maxConnections: configuration.poolSize, acquireTimeout: .seconds(5)))
    let metrics = IngestMetrics()
    let committer = GroupCommitter(
        pool: pool, writers: configuration.writers, maxQueuedRequests: configuration.maxQueuedRequests, backoff: configuration.databaseBackoff,
        commitTimeout: configuration.commitTimeout, metrics: metrics, logger: logger)
    let migrator: Migrator? = {
        if let directory = configuration.migrationsDirectory { return try? Migrator(directory: directory) }
        return (try? MigrationFile.locateDirectory()).flatMap { try? Migrator(directory: $0) }
    }()

    let ingest = IngestController(
        keys: WriteKeyStore(pool: pool, cacheTTL: configuration.keyCacheTTL), committer: committer,
        limiter: RateLimiter(rate: configuration.rateLimitPerSecond, burst: configuration.rateLimitBurst), metrics: metrics,
        policy: configuration.policy, maxBodyBytes: configuration.maxBodyBytes, bodyTimeout: configuration.bodyTimeout,
        refusalPause: configuration.refusalPause,
        forwarding: configuration.forwarding, logger: logger)
    var accessLogger = Logger(label: "onramp.access")
    accessLogger.logLevel = logger.logLevel
    let health = HealthController(pool: pool, committer: committer, metrics: metrics, migrator: migrator)
    let router = buildRouter(
        ingest: ingest, health: health, metrics: metrics,
        accessLog: configuration.accessLog ? AccessLogMiddleware(logger: accessLogger, forwarding: configuration.forwarding) : nil,
        metricsRoute: configuration.metricsEndpoint == .apiPort)

    let onRunning = configuration.onServerRunning
    var app = Application(
        router: router,
        server: .http1(configuration: .init(idleTimeout: TimeAmount(configuration.idleTimeout))),
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "onramp"),
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? configuration.port
            logger.info("onramp serve listening", metadata: ["host": "\(configuration.host)", "port": "\(port)"])
            await onRunning?(port)
        },
        logger: logger
    )
    // Service order matters: shutdown runs in reverse, so the pool closes last.
    app.addServices(
        PoolCloser(pool: pool), committer,
        PartitionUpkeep(pool: pool, interval: configuration.partitionMaintenanceInterval, logger: logger))
    if case .listener(let listen) = configuration.metricsEndpoint {
        // `/metrics` alone, on a listener of its own; a port it cannot bind stops the server.
        let metricsRouter = Router()
        metricsRouter.get("/metrics") { _, _ in health.metricsResponse() }
        let onMetrics = configuration.onMetricsRunning
        app.addServices(Application(
            router: metricsRouter,
            configuration: .init(address: .hostname(listen.host, port: listen.port), serverName: "onramp-metrics"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? listen.port
                logger.info("onramp metrics listening", metadata: ["host": "\(listen.host)", "port": "\(port)"])
                await onMetrics?(port)
            },
            logger: logger))
    }
    return app
}

/// The API's routes over the controllers they are given: the server's (a
/// database behind them), or a route test's (`IngestController` over an
/// in-memory key lookup and event sink, no health routes).
func buildRouter(
    ingest: IngestController, health: HealthController?, metrics: IngestMetrics, accessLog: AccessLogMiddleware? = nil,
    metricsRoute: Bool = true
) -> Router<IngestRequestContext> {
    let router = Router(context: IngestRequestContext.self)
    // Outermost, so its line has the status every other part settled on.
    if let accessLog { router.add(middleware: accessLog) }
    router.add(middleware: StatusMetricsMiddleware(metrics: metrics))
    var routes = RouteTable()
    ingest.addRoutes(to: router, table: &routes)
    health?.addRoutes(to: router, table: &routes, metricsRoute: metricsRoute)
    // Added last, so it wraps only the router's not-found answer: 405 or 404, as JSON.
    router.add(middleware: UnmatchedRouteMiddleware(table: routes))
    return router
}

/// Counts every answer by status (`onramp_http_requests_total`).
struct StatusMetricsMiddleware: RouterMiddleware {
    let metrics: IngestMetrics

    func handle(
        _ request: Request, context: IngestRequestContext, next: (Request, IngestRequestContext) async throws -> Response
    ) async throws -> Response {
        do {
            let response = try await next(request, context)
            metrics.request(status: response.status.code)
            return response
        } catch let error as any HTTPResponseError {
            metrics.request(status: error.status.code)
            throw error
        } catch {
            metrics.request(status: 500)
            throw error
        }
    }
}

/// Closes the pool when the service group shuts down.
struct PoolCloser: Service {
    let pool: ConnectionPool

    func run() async throws {
        try? await gracefulShutdown()
        await pool.close()
    }
}

/// Calls `onramp_ensure_coming_partitions()` at start-up and then every `interval`.
struct PartitionUpkeep: Service {
    let pool: ConnectionPool
    let interval: Duration
    let logger: Logger

    func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            do {
                let created = try await pool.withConnection { try EventStore.ensurePartitions(on: $0) }
                if created > 0 { logger.info("created event partitions", metadata: ["count": "\(created)"]) }
            } catch {
                logger.warning("could not ensure event partitions", metadata: ["error": "\(error)"])
            }
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return
            }
        }
    }
}
