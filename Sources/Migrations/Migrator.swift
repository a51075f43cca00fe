public import Foundation
public import LibPQ

/// Applies migrations in order, each in its own transaction, and records each
/// with a SHA-256 of its text. A second run is a no-op; a recorded migration whose
/// file changed stops everything, because the database no longer matches the code.
public struct Migrator: Sendable {
    public let files: [MigrationFile]
    /// How the schema distributes on Citus (`sql/citus/distribute.sql`),
    /// run after the migrations on a database with the citus extension.
    public let citusLayout: String?
    /// The extension the funnel aggregates run on where the server has it
    /// (`FunnelAggregates`); a test names a missing one to see the fallback.
    public var funnelExtension = FunnelAggregates.extensionName

    public init(files: [MigrationFile], citusLayout: String? = nil) {
        self.files = files
        self.citusLayout = citusLayout
    }

    /// The migrations in `directory` (`sql/migrations`), and the Citus layout
    /// beside it (`sql/citus/distribute.sql`) when there is one.
    public init(directory: URL) throws {
        let layout = directory.deletingLastPathComponent().appendingPathComponent("citus/distribute.sql")
        self.init(
            files: try MigrationFile.load(from: directory),
            citusLayout: FileManager.default.fileExists(atPath: layout.path) ? try String(contentsOf: layout, encoding: .utf8) : nil)
    }

    public struct Outcome: Sendable, Equatable {
        public var applied: [String]
        public var alreadyApplied: [String]
        /// The database is a Citus coordinator, and its schema is distributed.
        public var distributed = false
        /// What `analytics.window_funnel` runs on.
        public var funnelAggregates: FunnelAggregates.Implementation?
        /// Whether a login granted some apps is kept from counting the others'
        /// rows (`CountsGuard`); nil where the funnel extension is not native.
        public var countsGuard: CountsGuard.State?
        /// The server's other databases every role may connect to, where this
        /// one's database-wide counters are readable (`CountsGuard`).
        public var databasesOpenToAll: [String] = []
    }

    /// Whether to distribute the schema on Citus.
    public enum Citus: Sendable {
        /// When the database has the citus extension.
        case detect
        /// Always: a database without the extension is an error.
        case required
    }

    /// Checksums an applied migration had before a change to its comments
    /// alone (version -> earlier SHA-256s): a database that recorded one is
    /// not stopped, and its record is brought forward to the file as it is.
    /// 002, 008, 009, 010: their comments cited a document the repository
    /// does not hold; they now cite docs/funnels.md.
    static let rewordedComments: [Int: Set<String>] = [
        2: ["2feba77483bc59ba97e81a05990d5698bc90129b753609f8918f52fac0f5cb1c"],
        8: ["d1c58ce43b684da88f2fdfe745e951433195decacab138f6b0ff442c704e672a"],
        9: ["09118cc2d2038a3cd84bfaac4af92b441ef3e882d4823d7ca6e323db7a51c383"],
        10: ["217f25abe93eaf50b5ac2507b6ee2410aef189f70118c5524dc94fc6564f51a0"],
    ]

    /// Serialises concurrent `migrate` runs (two servers starting at once).
    static let lockKey: Int64 = 0x6f6e_7261_6d70_01

    @discardableResult
    public func migrate(_ connection: Connection, citus: Citus = .detect) throws -> Outcome {
        try connection.query("SELECT pg_advisory_lock($1)", [.int(Self.lockKey)])
        defer { _ = try? connection.query("SELECT pg_advisory_unlock($1)", [.int(Self.lockKey)]) }
        try connection.executeScript(
            """
            CREATE TABLE IF NOT EXISTS onramp_schema_migrations (
                version    integer PRIMARY KEY,
                name       text NOT NULL,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """)
        let recorded = try self.recorded(connection)
        try verify(recorded: recorded, connection: connection)
        let onCitus = try connection.query("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").scalar(Bool.self)
        if citus == .required, !onCitus {
            throw MigrationError("--citus: the database has no citus extension (CREATE EXTENSION citus on the coordinator and its workers, and add the workers)")
        }
        if onCitus, citusLayout == nil { throw MigrationError("the database is a Citus coordinator, but sql/citus/distribute.sql was not found beside the migrations") }
        // Before the schema is distributed, migrations create local objects on
        // the coordinator alone (sql/citus/distribute.sql says why); after, Citus
        // must carry every change to the shards.
        let local = try onCitus && !Self.isDistributed(connection)
        var outcome = Outcome(applied: [], alreadyApplied: [])
        for file in files {
            if recorded[file.version] != nil {
                outcome.alreadyApplied.append(file.fileName)
                continue
            }
            let checksum = try Self.checksum(file.sql, connection)
            try Self.retryingClusterRaces {
                try connection.transaction { c in
                    if local { try c.executeScript("SET LOCAL citus.enable_ddl_propagation = off") }
                    try c.executeScript(file.sql)
                    try c.query(
                        "INSERT INTO onramp_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                        [.int(file.version), .text(file.name), .text(checksum)])
                }
            }
            outcome.applied.append(file.fileName)
        }
        if onCitus, let citusLayout {
            try connection.transaction { c in try c.executeScript(citusLayout) }
            outcome.distributed = true
        }
        // After the layout on Citus: the extension goes to the workers with
        // the schema it lives in there, and the aggregates made again on it
        // are distributed by the layout's second run.
        outcome.funnelAggregates = try FunnelAggregates.install(connection, extension: funnelExtension)
        if case .native = outcome.funnelAggregates {
            if onCitus, let citusLayout { try connection.transaction { c in try c.executeScript(citusLayout) } }
            outcome.countsGuard = try CountsGuard.install(connection, library: funnelExtension)
            outcome.databasesOpenToAll = try CountsGuard.databasesOpenToAll(connection)
        }
        return outcome
    }

    /// Whether the log is a Citus distributed table already.
    static func isDistributed(_ connection: Connection) throws -> Bool {
        try connection.query(
            "SELECT to_regclass('events') IS NOT NULL AND EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('events'))"
        ).scalar(Bool.self)
    }

    /// Runs `body` (one migration's transaction) again when it lost a race on
    /// what the whole cluster shares. The lock above serialises migrations of
    /// one database only (advisory locks are per database), but roles, their
    /// settings and grants on them are cluster-wide: two databases of one
    /// cluster migrating at once make PostgreSQL answer "tuple concurrently
    /// updated" (XX000) or a duplicate role (23505, 42710). The transaction
    /// rolled back, so running it again is safe, and the role then exists.
    static func retryingClusterRaces(attempts: Int = 8, _ body: () throws -> Void) throws {
        for attempt in 1... {
            do {
                return try body()
            } catch let error as PostgresError where attempt < attempts && error.isClusterRace {
                usleep(UInt32(50_000 * attempt + Int.random(in: 0..<50_000)))
            }
        }
    }

    /// Files not yet applied; empty means the schema is current (readiness).
    public func pending(_ connection: Connection) throws -> [MigrationFile] {
        let exists = try connection.query("SELECT to_regclass('onramp_schema_migrations') IS NOT NULL").scalar(Bool.self)
        guard exists else { return files }
        let recorded = try self.recorded(connection)
        return files.filter { recorded[$0.version] == nil }
    }

    private func recorded(_ connection: Connection) throws -> [Int: (name: String, checksum: String)] {
        var map: [Int: (name: String, checksum: String)] = [:]
        for row in try connection.query("SELECT version, name, checksum FROM onramp_schema_migrations ORDER BY version").rows {
            map[try row.decode(Int.self, at: 0)] = (try row.decode(String.self, at: 1), try row.decode(String.self, at: 2))
        }
        return map
    }

    private func verify(recorded: [Int: (name: String, checksum: String)], connection: Connection) throws {
        let known = Dictionary(uniqueKeysWithValues: files.map { ($0.version, $0) })
        for (version, entry) in recorded.sorted(by: { $0.key < $1.key }) {
            guard let file = known[version] else {
                throw MigrationError(
                    "the database has migration \(String(format: "%03d", version))_\(entry.name) applied, "
                        + "but no such file exists here; is this binary older than the database?")
            }
            let checksum = try Self.checksum(file.sql, connection)
            if checksum != entry.checksum, Self.rewordedComments[version]?.contains(entry.checksum) == true {
                try connection.query(
                    "UPDATE onramp_schema_migrations SET checksum = $1 WHERE version = $2", [.text(checksum), .int(Int64(version))])
                continue
            }
            guard checksum == entry.checksum else {
                throw MigrationError(
                    "migration \(file.fileName) was changed after it was applied "
                        + "(recorded sha256 \(entry.checksum.prefix(12))…, file now \(checksum.prefix(12))…); "
                        + "restore the file and add a new migration instead")
            }
        }
    }

    /// SHA-256 computed by PostgreSQL itself, so no crypto dependency is needed here.
    static func checksum(_ sql: String, _ connection: Connection) throws -> String {
        try connection.query("SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", [.text(sql)]).scalar(String.self)
    }
}

extension PostgresError {
    /// A concurrent change to a cluster-wide catalog row (a role, its settings).
    var isClusterRace: Bool {
        switch sqlState {
        case "XX000": message.contains("tuple concurrently updated")
        case "23505": constraint == "pg_authid_rolname_index"  // two CREATE ROLEs of one name
        case "42710": message.contains("role")  // the other's CREATE ROLE committed first
        default: false
        }
    }
}
