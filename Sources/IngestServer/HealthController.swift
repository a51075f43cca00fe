import CoreMetrics
import Foundation
import Hummingbird
import LibPQ
import Migrations

/// `/healthz`, `/readyz`, `/metrics`.
struct HealthController: Sendable {
    let pool: ConnectionPool
    let committer: GroupCommitter
    let metrics: IngestMetrics
    let migrator: Migrator?

    struct Status: Codable, Sendable {
        var status: String
    }

    /// Through `table`, which records them; `/metrics` too unless it has a listener of its own.
    func addRoutes(to router: Router<IngestRequestContext>, table: inout RouteTable, metricsRoute: Bool = true) {
        table.on(.get, "/healthz", in: router) { _, _ in JSONBody.response(Status(status: "ok")) }
        table.on(.get, "/readyz", in: router) { _, _ in try await ready() }
        if metricsRoute { table.on(.get, "/metrics", in: router) { _, _ in metricsResponse() } }
    }

    /// The metrics as of now, in Prometheus's text format.
    func metricsResponse() -> Response {
        metrics.updatePool(pool.usage)
        metrics.queueDepth.record(committer.queueDepth)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: .init(string: metrics.render())))
    }

    /// Ready when the database answers and has every migration this binary knows.
    func ready() async throws(APIError) -> Response {
        let migrator = self.migrator
        let pending: Result<Int, any Error>
        do {
            pending = .success(
                try await pool.withConnection { connection in
                    _ = try connection.query("SELECT 1")
                    return try migrator?.pending(connection).count ?? 0
                })
        } catch {
            pending = .failure(error)
        }
        switch pending {
        case .success(0):
            return JSONBody.response(Status(status: "ready"))
        case .success(let count):
            throw APIError(
                status: .serviceUnavailable, code: "migrations_pending",
                message: "\(count) migration(s) not applied; run onramp migrate", retryAfter: 5)
        case .failure:
            throw APIError(status: .serviceUnavailable, code: "database_unavailable", message: "the database cannot be reached", retryAfter: 1)
        }
    }
}
