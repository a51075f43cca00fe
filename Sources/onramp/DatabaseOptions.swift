import ArgumentParser
import Foundation

/// `--database-url`, shared by every subcommand; defaults to `$DATABASE_URL`.
struct DatabaseOptions: ParsableArguments {
    @Option(name: .customLong("database-url"), help: "PostgreSQL URL or conninfo (default: $DATABASE_URL).")
    var databaseURL: String?

    func resolvedURL() throws -> String {
        if let databaseURL, !databaseURL.isEmpty { return databaseURL }
        if let env = ProcessInfo.processInfo.environment["DATABASE_URL"], !env.isEmpty { return env }
        throw ValidationError("no database: pass --database-url or set DATABASE_URL")
    }
}
