import ArgumentParser
import Foundation
import LibPQ
import Migrations

/// `onramp migrate`: applies sql/migrations in order; a no-op when current.
struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "migrate", abstract: "Apply database migrations (idempotent).")

    @OptionGroup var database: DatabaseOptions

    @Option(help: "Directory of NNN_name.sql files (default: found as the README describes).")
    var migrations: String?

    @Flag(help: "Distribute the schema on Citus (docs/scaling.md); the default when the database has the citus extension, and an error when it has not.")
    var citus = false

    func run() async throws {
        let directory = try MigrationFile.locateDirectory(explicit: migrations)
        let migrator = try Migrator(directory: directory)
        let outcome = try await ConnectionPool.using(url: try database.resolvedURL()) { pool in
            try await pool.withConnection { try migrator.migrate($0, citus: citus ? .required : .detect) }
        }
        for name in outcome.applied { Console.info("applied \(name)") }
        Console.info(
            outcome.applied.isEmpty
                ? "schema is current (\(outcome.alreadyApplied.count) migrations already applied)"
                : "applied \(outcome.applied.count) migration(s); \(outcome.alreadyApplied.count) already applied")
        switch outcome.funnelAggregates {
        case .native(let version)?: Console.info("analytics.window_funnel: native (extension \(FunnelAggregates.extensionName) \(version))")
        case .fallback(let reason)?: Console.info("warning: analytics.window_funnel runs on its PL/pgSQL fallback, slower on large logs: \(reason)")
        case nil: break
        }
        switch outcome.countsGuard {
        case .on?:
            Console.info("counts of ungranted apps: guarded (EXPLAIN ANALYZE and the scan counters; docs/access.md)")
            if !outcome.databasesOpenToAll.isEmpty {
                Console.info(
                    "warning: every role may connect to \(outcome.databasesOpenToAll.joined(separator: ", ")), where this database's "
                        + "database-wide scan counters are readable: REVOKE CONNECT ON DATABASE … FROM PUBLIC there (docs/operations.md)")
            }
        case .off(let reason)?: warnUnguarded(reason)
        case nil: warnUnguarded("the guard is part of the native funnel extension")
        }
        if outcome.distributed { Console.info("Citus: the schema is distributed (sql/citus/distribute.sql)") }
    }

    private func warnUnguarded(_ reason: String) {
        Console.info("warning: a login granted some apps can count the other apps' rows with EXPLAIN ANALYZE: \(reason)")
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
