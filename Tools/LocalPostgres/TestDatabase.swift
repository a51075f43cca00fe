public import Foundation
public import LibPQ
import Migrations
import NIOConcurrencyHelpers
#if canImport(Glibc)
import Glibc
#endif

/// A fresh database per test. With `ONRAMP_TEST_DATABASE_URL` set, databases are
/// created on that server; otherwise one private cluster is started for the whole
/// test process and stopped when it exits. A migrated template is built once, so
/// each migrated database is a cheap `CREATE DATABASE … TEMPLATE`.
public struct TestDatabase: Sendable {
    public let name: String
    public let url: String
    /// URL of the server's maintenance database (for admin work such as killing backends).
    public let adminURL: String
    /// The private cluster, when the helper started one (nil with an external server).
    public let cluster: LocalCluster?

    /// A new, empty database, migrated unless `migrated` is false.
    public static func create(migrated: Bool = true) async throws -> TestDatabase {
        let server = try await TestServer.shared.get()
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(20)
        let template = migrated ? try await server.migratedTemplate() : "template0"
        try await server.admin.query("CREATE DATABASE \(name) TEMPLATE \(template)")
        // A database's own settings are not copied with it; `onramp migrate` made
        // the template's (the library each session loads: docs/access.md, "Counts").
        // Both names are the helper's own, never input.
        try await server.admin.query(
            """
            DO $$
            DECLARE c text;
            BEGIN
                FOR c IN SELECT unnest(s.setconfig) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
                         WHERE d.datname = '\(template)' AND s.setrole = 0 LOOP
                    EXECUTE format('ALTER DATABASE %I SET %I = %L', '\(name)', split_part(c, '=', 1), substr(c, strpos(c, '=') + 1));
                END LOOP;
            END
            $$
            """)
        return TestDatabase(
            name: String(name), url: server.url(database: String(name)), adminURL: server.url(database: server.adminDatabase),
            cluster: server.cluster)
    }

    /// Drops the database (connections to it are terminated).
    public func drop() async throws {
        let server = try await TestServer.shared.get()
        try await server.admin.query("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// This database's URL as `user` logs in (the roles `onramp migrate` makes:
    /// `onramp_analyst`, `onramp_operator`), without a password.
    public func url(as user: String) throws -> String {
        try Self.url(url, as: user)
    }

    /// `url` with `user` logging in, without a password: how the tests and
    /// benchmarks reach one database as each of its roles and logins.
    public static func url(_ url: String, as user: String) throws -> String {
        guard var components = URLComponents(string: url) else { throw PostgresError(.connectionFailed, message: "not a URL: \(url)") }
        components.user = user
        components.password = nil
        return components.string ?? url
    }

    /// A pool on this database.
    public func pool(maxConnections: Int = 4) -> ConnectionPool {
        ConnectionPool(url: url, maxConnections: maxConnections)
    }

    /// The repository's `sql/migrations`, found from this source file's location
    /// so tests work from any working directory.
    public static var migrationsDirectory: URL {
        get throws {
            let fromSource = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("sql/migrations")
            return try MigrationFile.locateDirectory(
                explicit: FileManager.default.fileExists(atPath: fromSource.path) ? fromSource.path : nil)
        }
    }
}

/// The server the test databases live on, shared by every test in the process.
final class TestServer: Sendable {
    static let shared = Lazy()

    let cluster: LocalCluster?
    let baseURL: URLComponents
    let adminDatabase: String
    let admin: ConnectionPool
    private let template = NIOLockedValueBox<Task<String, any Error>?>(nil)

    init(cluster: LocalCluster?, baseURL: URLComponents) {
        self.cluster = cluster
        self.baseURL = baseURL
        let db = baseURL.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        adminDatabase = db.isEmpty ? "postgres" : db
        var admin = baseURL
        admin.path = "/" + adminDatabase
        // Every test creates and drops a database through this pool, and a whole
        // suite starts at once: waiting is expected, so the timeout is generous.
        self.admin = ConnectionPool(.init(conninfo: admin.string ?? "", maxConnections: 4, acquireTimeout: .seconds(600)))
    }

    func url(database: String) -> String {
        var components = baseURL
        components.path = "/" + database
        return components.string ?? ""
    }

    /// Name of a template database with every migration applied, made once per
    /// process (unique per process, so parallel test runs on one server do not clash).
    func migratedTemplate() async throws -> String {
        let task = template.withLockedValue { slot -> Task<String, any Error> in
            if let existing = slot { return existing }
            let made = Task { try await self.makeTemplate() }
            slot = made
            return made
        }
        return try await task.value
    }

    private func makeTemplate() async throws -> String {
        let name = "onramp_template_\(getpid())_\(UUID().uuidString.prefix(6).lowercased())"
        try await admin.query("CREATE DATABASE \(name) TEMPLATE template0")
        // A private cluster goes with the process; on a server of the
        // caller's, the template would be left behind by every test run
        // (a failed migration's too).
        if cluster == nil {
            var maintenance = URLComponents(string: self.url(database: adminDatabase))
            let items = maintenance?.queryItems ?? []
            maintenance?.queryItems = items + [URLQueryItem(name: "connect_timeout", value: "5")]
            ClusterReaper.register(template: name, adminURL: maintenance?.string ?? self.url(database: adminDatabase))
        }
        let migrator = try Migrator(directory: try TestDatabase.migrationsDirectory)
        let url = self.url(database: name)
        let pool = ConnectionPool(url: url, maxConnections: 1)
        _ = try await pool.withConnection { try migrator.migrate($0) }
        await pool.close()
        return name
    }

    /// Starts (once) the private cluster or adopts `ONRAMP_TEST_DATABASE_URL`.
    final class Lazy: Sendable {
        // A pthread lock: ThreadSanitizer cannot see Synchronization.Mutex on Linux and reports false races.
        private let task = NIOLockedValueBox<Task<TestServer, any Error>?>(nil)

        func get() async throws -> TestServer {
            let task = self.task.withLockedValue { slot -> Task<TestServer, any Error> in
                if let existing = slot { return existing }
                let made = Task { try Self.boot() }
                slot = made
                return made
            }
            return try await task.value
        }

        private static func boot() throws -> TestServer {
            if let external = ProcessInfo.processInfo.environment["ONRAMP_TEST_DATABASE_URL"], !external.isEmpty {
                guard let components = URLComponents(string: external) else {
                    throw LocalClusterError("ONRAMP_TEST_DATABASE_URL is not a URL")
                }
                return TestServer(cluster: nil, baseURL: components)
            }
            let cluster = try LocalCluster.start()
            ClusterReaper.register(cluster)
            guard let components = URLComponents(string: cluster.url()) else {
                throw LocalClusterError("bad cluster URL")
            }
            return TestServer(cluster: cluster, baseURL: components)
        }
    }
}

/// Stops the private cluster, or drops the migrated template made on an
/// external server, when the test process exits normally.
enum ClusterReaper {
    static let clusters = NIOLockedValueBox<[LocalCluster]>([])
    /// Template databases to drop (name, the server's maintenance database
    /// URL, with a connect timeout: an exit must not hang on a server gone).
    static let templates = NIOLockedValueBox<[(name: String, adminURL: String)]>([])
    static let installed = NIOLockedValueBox(false)

    static func register(_ cluster: LocalCluster) {
        clusters.withLockedValue { $0.append(cluster) }
        installOnce()
    }

    static func register(template name: String, adminURL: String) {
        templates.withLockedValue { $0.append((name, adminURL)) }
        installOnce()
    }

    private static func installOnce() {
        let first = installed.withLockedValue { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        atexit {
            let templates = ClusterReaper.templates.withLockedValue { list in
                defer { list.removeAll() }
                return list
            }
            for template in templates {
                // The name is the helper's own (`onramp_template_<pid>_…`), never input.
                _ = try? Connection.connect(template.adminURL).query("DROP DATABASE IF EXISTS \(template.name) WITH (FORCE)")
            }
            let all = ClusterReaper.clusters.withLockedValue { list -> [LocalCluster] in
                defer { list.removeAll() }
                return list
            }
            for cluster in all { cluster.stop() }
        }
    }
}
