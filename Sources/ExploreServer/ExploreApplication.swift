import CivilDate
import Explore
import Foundation
import Funnels
public import Hummingbird
import LibPQ
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// Builds `onramp explore`: the explorer's page and the API it calls (docs/explore.md).
///
/// - `GET /`: the page, self-contained (no CDN: it works offline).
/// - `GET /metrics`: the explorer's queries and stores, for Prometheus (`ExploreMetrics`).
/// - `GET /api/apps`, `GET /api/catalog?app=`: what the pickers offer (the
///   app's events, paths and audiences).
/// - `POST /api/queries`: starts a funnel (the configuration's definition as
///   JSON, with `from`, `to`, `audiences` and `not_audiences`), answering its id; `GET /api/queries/ID`
///   polls it (progress, then the answer `onramp funnel --format json`
///   gives); `DELETE /api/queries/ID` cancels it.
/// - `POST /api/persons`, `/api/paths`, `/api/person-events`: the persons
///   behind a number, where they went, one person's events (`PersonRoutes`).
public func buildExploreApplication(configuration: ExploreConfiguration) throws -> some ApplicationProtocol {
    let logger = configuration.logger
    let pool = ConnectionPool(
        ConnectionPool.Configuration(conninfo: configuration.databaseURL, maxConnections: configuration.connections, acquireTimeout: .seconds(30)))
    let explorer = Explorer(cacheRoot: configuration.cacheRoot, timeoutSeconds: configuration.timeoutSeconds)
    let metrics = ExploreMetrics(cacheRoot: configuration.cacheRoot)
    let jobs = QueryJobs(
        pool: pool, explorer: explorer, keeping: configuration.keepingPaths, limit: 4 * configuration.connections, metrics: metrics)
    let router = Router()
    router.add(middleware: TokenGate(token: configuration.token, loopbackOnly: ExploreConfiguration.isLoopback(configuration.host)))
    router.get("/") { _, _ in ExplorePage.response }
    // For Prometheus: behind the token when there is one (a bearer header).
    router.get("/metrics") { _, _ in
        Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: metrics.render())))
    }
    router.get("/api/apps") { _, _ in
        let apps = try await pool.withConnection { c in
            try c.query("SELECT app FROM analytics.apps ORDER BY app").rows.map { try $0.decode(String.self, at: 0) }
        }
        return ExploreResponse.json(JSONText.object(["apps": apps]))
    }
    router.get("/api/catalog") { request, _ in
        guard let app = request.uri.queryParameters["app"].map(String.init), !app.isEmpty else {
            return ExploreResponse.error(.badRequest, "app: missing (expected ?app=NAME)")
        }
        do {
            let (catalog, audiences) = try await pool.withConnection { c in
                (try explorer.catalog(app: app, on: c, keeping: configuration.keepingPaths), try StoredAudienceList.read(c, app: app))
            }
            return ExploreResponse.json(JSONText.object([
                "app": catalog.app, "events": catalog.events, "paths": catalog.paths,
                "entries": catalog.entries.map { ["label": $0.label, "events": $0.events] as [String: Any] },
                "audiences": audiences.map { ["name": $0.name, "unit": $0.unit, "members": $0.members] as [String: Any] },
            ]))
        } catch let error as ExploreError {
            return ExploreResponse.error(error == .unknownApp(app) ? .notFound : .gatewayTimeout, error.description)
        } catch let error as PostgresError {
            return ExploreResponse.error(.serviceUnavailable, "the database: \(error)")
        }
    }
    router.post("/api/queries") { request, context in
        // Only JSON: a page of another site can post a form or plain text without asking first, not JSON.
        guard request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true else {
            return ExploreResponse.error(.unsupportedMediaType, "Content-Type: expected application/json")
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: 256 * 1024)
        } catch {
            return ExploreResponse.error(.contentTooLarge, "the query is larger than 256 KB")
        }
        switch QueryRequest.parse(Data(body.readableBytesView), configuration: configuration) {
        case .success(let query):
            guard let id = jobs.start(query) else {
                return ExploreResponse.error(.tooManyRequests, "too many queries at once: cancel one, or wait for its answer")
            }
            return ExploreResponse.json(JSONText.object(["id": id]), status: .accepted)
        case .failure(let error):
            return ExploreResponse.error(.badRequest, error.message)
        }
    }
    router.get("/api/queries/:id") { _, context in
        guard let id = context.parameters.get("id"), let status = jobs.status(id) else {
            return ExploreResponse.error(.notFound, "no such query (finished queries are kept 10 minutes)")
        }
        return ExploreResponse.json(status)
    }
    PersonRoutes.add(to: router, pool: pool, explorer: explorer, configuration: configuration)
    router.delete("/api/queries/:id") { _, context in
        guard let id = context.parameters.get("id"),
              try await NIOThreadPool.singleton.runIfActive({ jobs.cancel(id) }), let status = jobs.status(id)
        else {
            return ExploreResponse.error(.notFound, "no such query")
        }
        return ExploreResponse.json(status)  // cancelled, or what it had come to
    }

    let onRunning = configuration.onServerRunning
    var app = Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "onramp-explore"),
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? configuration.port
            logger.info("onramp explore listening", metadata: ["url": "http://\(configuration.host):\(port)/"])
            await onRunning?(port)
        },
        logger: logger)
    app.addServices(ExplorePoolCloser(pool: pool))
    return app
}

/// Closes the pool's connections when the server stops.
struct ExplorePoolCloser: Service {
    let pool: ConnectionPool

    func run() async throws {
        try? await gracefulShutdown()
        await pool.close()
    }
}

enum ExploreResponse {
    static func json(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func error(_ status: HTTPResponse.Status, _ message: String) -> Response {
        json(JSONText.object(["error": message]), status: status)
    }
}

/// A query the page posts, checked as `onramp funnel` checks its flags: the
/// definition by the configuration's parser (so errors name the same
/// fields), the days as YYYY-MM-DD, the audiences as lists of names.
enum QueryRequest {
    struct Refused: Error {
        let message: String
    }

    static func parse(_ body: Data, configuration: ExploreConfiguration) -> Result<FunnelQuery, Refused> {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            return .failure(Refused(message: "the body must be a JSON object with a 'definition'"))
        }
        guard var definition = object["definition"] as? [String: Any] else {
            return .failure(Refused(message: "definition: missing (expected a funnel as in the configuration, as JSON)"))
        }
        if definition["name"] == nil { definition["name"] = "explore" }
        guard let text = try? JSONSerialization.data(withJSONObject: definition, options: [.sortedKeys])
        else {
            return .failure(Refused(message: "definition: missing (expected a funnel as in the configuration, as JSON)"))
        }
        let funnel: Funnel
        do {
            // JSON is YAML: the same parser as --definition and the nightly configuration.
            funnel = try FunnelConfiguration.parseFunnel(yaml: String(decoding: text, as: UTF8.self), source: "definition")
        } catch {
            return .failure(Refused(message: error.description))
        }
        guard funnel.steps.count >= 2 else {
            return .failure(Refused(message: "steps: a funnel needs at least two steps (got \(funnel.steps.count))"))
        }
        var days: [String: String] = [:]
        for field in ["from", "to"] {
            guard let value = object[field], !(value is NSNull) else { continue }
            guard let day = value as? String, CohortCalendar.isDayText(day) else {
                return .failure(Refused(message: "\(field): expected a day as YYYY-MM-DD (got \(value))"))
            }
            days[field] = day
        }
        var audiences: [String: [String]] = [:]
        for field in ["audiences", "not_audiences"] {
            guard let value = object[field], !(value is NSNull) else { continue }
            guard let names = value as? [String], !names.contains(where: \.isEmpty) else {
                return .failure(Refused(message: "\(field): expected a list of audience names (got \(value))"))
            }
            audiences[field] = names
        }
        let zone = configuration.timeZones[funnel.app] ?? configuration.defaultTimeZone
        var query = FunnelQuery(funnel: funnel, timeZone: zone, now: Timestamps.microseconds(Date()), from: days["from"], to: days["to"])
        query.audiences = AudienceFilter(within: audiences["audiences"] ?? [], outside: audiences["not_audiences"] ?? [])
        return .success(query)
    }
}

/// The audiences the page offers for an app: those the last run kept that
/// the login may read (`analytics.audiences`).
enum StoredAudienceList {
    struct Entry {
        var name: String
        var unit: String
        var members: Int
    }

    static func read(_ c: Connection, app: String) throws -> [Entry] {
        try c.query("SELECT audience, unit, members FROM analytics.audiences WHERE app = $1 ORDER BY audience", [.text(app)]).rows.map {
            Entry(name: try $0.decode(String.self, at: 0), unit: try $0.decode(String.self, at: 1), members: try $0.decode(Int.self, at: 2))
        }
    }
}
