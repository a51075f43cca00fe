import ArgumentParser
import EventLog
import Foundation
import LibPQ

/// `onramp keys create|list|revoke`: write keys, stored only as hashes.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage write keys.", subcommands: [Create.self, List.self, Revoke.self])

    /// `keys create --app NAME`: prints the new key alone on stdout.
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a write key for an app; prints the key alone on stdout.")
        @OptionGroup var database: DatabaseOptions
        @Option(help: "The app the key writes to.") var app: String

        func validate() throws {
            guard !app.isEmpty, app.count <= 100 else { throw ValidationError("--app must be 1–100 characters") }
        }

        func run() async throws {
            let key = try await Keys.withStore(database) { try await $0.create(app: app) }
            print(key)
            Console.info("created a write key for app '\(app)'; it is shown only now (only its hash is stored)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List write keys (prefix, app, dates).")
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let keys = try await Keys.withStore(database) { try await $0.list() }
            let formatter = ISO8601DateFormatter()
            print("id\tprefix\tapp\tcreated\trevoked")
            for key in keys {
                print("\(key.id)\t\(key.prefix)\t\(key.app)\t\(formatter.string(from: key.createdAt))\t\(key.revokedAt.map(formatter.string) ?? "-")")
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a write key by full key, prefix or id.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The key, its prefix as `keys list` shows it, or its id.") var key: String

        func run() async throws {
            let count = try await Keys.withStore(database) { try await $0.revoke(key) }
            guard count > 0 else { throw ValidationError("no live key matches '\(key)'") }
            Console.info("revoked \(count) key(s)")
        }
    }

    static func withStore<T: Sendable>(_ database: DatabaseOptions, _ body: (WriteKeyStore) async throws -> T) async throws -> T {
        let pool = ConnectionPool(url: try database.resolvedURL(), maxConnections: 1)
        let result: Result<T, any Error>
        do { result = .success(try await body(WriteKeyStore(pool: pool, cacheTTL: .zero))) } catch { result = .failure(error) }
        await pool.close()
        return try result.get()
    }
}
