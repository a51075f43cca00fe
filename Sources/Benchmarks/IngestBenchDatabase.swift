import Foundation
import LibPQ
import LocalPostgres
import Migrations

/// The fresh, migrated database `bench ingest` writes to: a new database on
/// `$DATABASE_URL`'s server, or a private durable cluster (fsync on, as in
/// production: the benchmark measures durable commits) when unset.
///
/// Kept apart from `BenchDatabase` so the ingest benchmark can also reach the
/// cluster's data directory for `perf`/profiling and so each file stands alone.
final class IngestBenchDatabase: Sendable {
    let url: String
    let cluster: LocalCluster?

    static func make(serverURL: String?, migrations: URL) async throws -> IngestBenchDatabase {
        let cluster: LocalCluster?
        let base: String
        if let serverURL, !serverURL.isEmpty {
            cluster = nil
            base = serverURL
        } else {
            cluster = try LocalCluster.start(options: .init(durable: true, maxConnections: 300))
            base = cluster?.url() ?? ""
        }
        guard var components = URLComponents(string: base) else { throw IngestBenchError("not a URL: \(base)") }
        let name = "onramp_ingest_\(UUID().uuidString.prefix(8).lowercased())"
        let admin = ConnectionPool(url: base, maxConnections: 1)
        try await admin.query("CREATE DATABASE \(name)")
        await admin.close()
        components.path = "/" + name
        let url = components.string ?? base
        let pool = ConnectionPool(url: url, maxConnections: 1)
        let migrator = try Migrator(directory: migrations)
        _ = try await pool.withConnection { try migrator.migrate($0) }
        await pool.close()
        return IngestBenchDatabase(url: url, cluster: cluster)
    }

    private init(url: String, cluster: LocalCluster?) {
        self.url = url
        self.cluster = cluster
    }

    /// Stops the private cluster, if this benchmark started one.
    func finish() {
        cluster?.stop()
    }
}

/// Why an ingest benchmark or fault run could not go on.
public struct IngestBenchError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension Duration {
    /// Seconds as a `Double`, for rates.
    var ingestSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
