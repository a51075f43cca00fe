public import Foundation
import LibPQ
public import LocalPostgres
import Migrations

/// A fresh, migrated database for a benchmark: a new database on `$DATABASE_URL`'s
/// server, or a private durable cluster (fsync on, as in production) when unset.
public final class BenchDatabase: Sendable {
    public let url: String
    public let cluster: LocalCluster?

    public static func make(serverURL: String?, migrations: URL) async throws -> BenchDatabase {
        let cluster: LocalCluster?
        let base: String
        if let serverURL, !serverURL.isEmpty {
            cluster = nil
            base = serverURL
        } else {
            cluster = try LocalCluster.start(options: .init(durable: true, maxConnections: 300))
            base = cluster?.url() ?? ""
        }
        guard var components = URLComponents(string: base) else { throw BenchError("not a URL: \(base)") }
        let name = "onramp_bench_\(UUID().uuidString.prefix(8).lowercased())"
        let admin = ConnectionPool(url: base, maxConnections: 1)
        try await admin.query("CREATE DATABASE \(name)")
        await admin.close()
        components.path = "/" + name
        let url = components.string ?? base
        let pool = ConnectionPool(url: url, maxConnections: 1)
        let migrator = try Migrator(directory: migrations)
        _ = try await pool.withConnection { try migrator.migrate($0) }
        await pool.close()
        return BenchDatabase(url: url, cluster: cluster)
    }

    init(url: String, cluster: LocalCluster?) {
        self.url = url
        self.cluster = cluster
    }

    /// Stops the private cluster, if this benchmark started one.
    public func finish() {
        cluster?.stop()
    }
}

public struct BenchError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Wall time of a block, in seconds.
func measure<T>(_ body: () async throws -> T) async rethrows -> (T, Double) {
    let start = ContinuousClock.now
    let value = try await body()
    return (value, (ContinuousClock.now - start).seconds)
}

extension Duration {
    /// Seconds as a `Double`, for rates.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
