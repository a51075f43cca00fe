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
        let name = "onramp_bench_\(UUID().uuidString.prefix(8).lowercased())"
        let url = try database(name, on: base)
        try await onServer(base, ["CREATE DATABASE \(name)"])
        let pool = ConnectionPool(url: url, maxConnections: 1)
        let migrator = try Migrator(directory: migrations)
        _ = try await pool.withConnection { try migrator.migrate($0) }
        await pool.close()
        return BenchDatabase(url: url, serverURL: base, name: name, cluster: cluster)
    }

    /// The server's own database, for CREATE and DROP DATABASE.
    private let serverURL: String
    private let name: String

    init(url: String, serverURL: String, name: String, cluster: LocalCluster?) {
        self.url = url
        self.serverURL = serverURL
        self.name = name
        self.cluster = cluster
    }

    /// A copy of this database as it stands, or of its copy `source`
    /// (`CREATE DATABASE … TEMPLATE`; nothing may be connected to it
    /// meanwhile), for runs that must each start from the same state.
    /// Returns its URL; `dropCopy` removes it.
    /// The files are copied and checkpointed (`FILE_COPY`; the default writes
    /// the whole database through the WAL), so what is timed next does not
    /// share the machine with the copy's writes.
    public func copy(_ suffix: String, of source: String? = nil) async throws -> String {
        try Self.checkCopySuffix(suffix)
        if let source { try Self.checkCopySuffix(source) }
        let template = source.map { "\(name)_\($0)" } ?? name
        try await Self.onServer(serverURL, ["CREATE DATABASE \(name)_\(suffix) TEMPLATE \(template) STRATEGY = FILE_COPY", "CHECKPOINT"])
        return try Self.database("\(name)_\(suffix)", on: serverURL)
    }

    /// Whether `suffix` names a copy as written: it goes into SQL
    /// unquoted and into the copy's URL, so only what PostgreSQL keeps as it
    /// is (lowercase, digits, '_'), short enough that the name is not cut.
    public static func isCopySuffix(_ suffix: String) -> Bool {
        (1...30).contains(suffix.utf8.count) && suffix.utf8.allSatisfy { (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5f }
    }

    private static func checkCopySuffix(_ suffix: String) throws {
        guard isCopySuffix(suffix) else { throw BenchError("not a copy suffix (a–z, 0–9, '_', at most 30): '\(suffix)'") }
    }

    public func dropCopy(_ suffix: String) async throws {
        try Self.checkCopySuffix(suffix)
        try await Self.onServer(serverURL, ["DROP DATABASE IF EXISTS \(name)_\(suffix)"])
    }

    /// Runs `statements` (CREATE / DROP DATABASE: names we made, never input)
    /// on the server's own database, closing the connection either way.
    private static func onServer(_ serverURL: String, _ statements: [String]) async throws {
        let admin = ConnectionPool(url: serverURL, maxConnections: 1)
        do {
            for statement in statements { try await admin.query(statement) }
        } catch {
            await admin.close()
            throw error
        }
        await admin.close()
    }

    /// The URL of database `name` on the server of `serverURL`.
    private static func database(_ name: String, on serverURL: String) throws -> String {
        guard var components = URLComponents(string: serverURL) else { throw BenchError("not a URL: \(serverURL)") }
        components.path = "/" + name
        return components.string ?? serverURL
    }

    /// Runs `body` with a fresh database (`make`), then removes it, whether
    /// `body` returns or throws: drops it from the server it was given, or
    /// stops the private cluster it started. A 10 M history is 5 GB, which
    /// each run on a server of one's own had left behind.
    public static func with<T>(
        serverURL: String?, migrations: URL, _ body: (BenchDatabase) async throws -> T
    ) async throws -> T {
        let database = try await make(serverURL: serverURL, migrations: migrations)
        let result: Result<T, any Error>
        do { result = .success(try await body(database)) } catch { result = .failure(error) }
        await database.finish()
        return try result.get()
    }

    /// Drops the database from the server given to `make` (its sessions
    /// ended first), or stops the private cluster this benchmark started.
    private func finish() async {
        if let cluster {
            cluster.stop()
        } else {
            try? await Self.onServer(serverURL, ["DROP DATABASE IF EXISTS \(name) WITH (FORCE)"])
        }
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
