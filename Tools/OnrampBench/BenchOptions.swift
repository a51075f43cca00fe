import ArgumentParser
import Benchmarks
import Foundation
import Migrations

/// What both benchmarks take: where to create their database, the migrations,
/// and `--json`.
struct BenchOptions: ParsableArguments {
    @Option(name: .customLong("database-url"), help: "Server to create the bench database on, which is dropped at the end (default: $DATABASE_URL, else a private durable cluster).")
    var databaseURL: String?

    @Option(help: "Directory of migrations (default: found as the README describes).")
    var migrations: String?

    @Flag(help: "Print the result as JSON.")
    var json = false

    var serverURL: String? { databaseURL ?? ProcessInfo.processInfo.environment["DATABASE_URL"] }

    func migrationsDirectory() throws -> URL { try MigrationFile.locateDirectory(explicit: migrations) }

    /// Checks `--keep-copy`: a copy needs a server that outlives the run, and a name PostgreSQL keeps as written.
    func checkKeptCopy(_ suffix: String?) throws {
        guard let suffix else { return }
        guard !(serverURL ?? "").isEmpty else {
            throw ValidationError("--keep-copy needs a server (--database-url or $DATABASE_URL): a private cluster is stopped at the end")
        }
        guard BenchDatabase.isCopySuffix(suffix) else {
            throw ValidationError("--keep-copy must be 1 to 30 of a–z, 0–9 and '_' (got '\(suffix)')")
        }
    }

    /// Prints `result` as sorted, pretty JSON when `--json` was given; false otherwise.
    func printedJSON(_ result: some Encodable) throws -> Bool {
        guard json else { return false }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        print(String(decoding: try encoder.encode(result), as: UTF8.self))
        return true
    }
}

/// Progress goes to stderr, so stdout carries only the result.
func info(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}
