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

    func run() async throws {
        let directory = try MigrationFile.locateDirectory(explicit: migrations)
        let migrator = try Migrator(directory: directory)
        let outcome = try await ConnectionPool.using(url: try database.resolvedURL()) { pool in
            try await pool.withConnection { try migrator.migrate($0) }
        }
        for name in outcome.applied { Console.info("applied \(name)") }
        Console.info(
            outcome.applied.isEmpty
                ? "schema is current (\(outcome.alreadyApplied.count) migrations already applied)"
                : "applied \(outcome.applied.count) migration(s); \(outcome.alreadyApplied.count) already applied")
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
