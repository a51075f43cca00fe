import ArgumentParser
import EventLog
import Foundation
import LibPQ

/// `onramp keys create|list|revoke|allow-origin|disallow-origin`: write keys,
/// stored only as hashes, with the web origins allowed to post with them.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Manage write keys.",
        subcommands: [Create.self, List.self, Revoke.self, AllowOrigin.self, DisallowOrigin.self])

    /// `keys create --app NAME [--allow-origin URL ...]`: prints the new key alone on stdout.
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create", abstract: "Create a write key for an app; prints the key alone on stdout.")
        @OptionGroup var database: DatabaseOptions
        @Option(help: "The app the key writes to.") var app: String
        @Option(
            help: ArgumentHelp(
                "A web origin (scheme://host[:port]) whose pages may post with the key; repeatable. None: server-only.",
                valueName: "origin"))
        var allowOrigin: [String] = []

        func validate() throws {
            guard !app.isEmpty, app.count <= 100 else { throw ValidationError("--app must be 1–100 characters") }
            _ = try Keys.origins(allowOrigin, option: "--allow-origin")
        }

        func run() async throws {
            let origins = try Keys.origins(allowOrigin, option: "--allow-origin")
            let key = try await Keys.withStore(database) { try await $0.create(app: app, allowedOrigins: origins) }
            print(key)
            Console.info("created a write key for app '\(app)'; it is shown only now (only its hash is stored)")
            if !origins.isEmpty { Console.info("pages from \(origins.joined(separator: ", ")) may post with it") }
        }
    }

    /// `keys allow-origin KEY ORIGIN`.
    struct AllowOrigin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "allow-origin", abstract: "Let pages from a web origin post with a key (by full key, prefix or id).")
        @OptionGroup var target: OriginTarget

        func run() async throws {
            let (origin, count) = try await target.set(allowed: true)
            Console.info("pages from \(origin) may post with \(count) key(s) (servers pick it up within 5 s)")
        }
    }

    /// `keys disallow-origin KEY ORIGIN`.
    struct DisallowOrigin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "disallow-origin", abstract: "Stop pages from a web origin posting with a key.")
        @OptionGroup var target: OriginTarget

        func run() async throws {
            let (origin, count) = try await target.set(allowed: false)
            Console.info("pages from \(origin) may no longer post with \(count) key(s) (servers pick it up within 5 s)")
        }
    }

    /// The key and the origin `allow-origin` and `disallow-origin` change.
    struct OriginTarget: ParsableArguments {
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The key, its prefix as `keys list` shows it, or its id.") var key: String
        @Argument(help: "The origin, scheme://host[:port], e.g. https://app.example.com.") var origin: String

        /// Allows or disallows the origin (as browsers send it) for the matching live keys: the origin and how many keys.
        func set(allowed: Bool) async throws -> (String, Int) {
            let normalized = try Keys.origins([origin], option: "ORIGIN")[0]
            let count = try await Keys.withStore(database) { try await $0.setOrigin(normalized, allowed: allowed, forKey: key) }
            guard count > 0 else { throw ValidationError("no live key matches '\(key)'") }
            return (normalized, count)
        }
    }

    /// Origins in the form browsers send, or an error naming the option and the form expected.
    static func origins(_ values: [String], option: String) throws -> [String] {
        do {
            return try values.map { value throws(WebOrigin.Invalid) in try WebOrigin.normalize(value) }
        } catch {
            throw ValidationError("\(option): \(error.description)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List write keys (prefix, app, dates).")
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let keys = try await Keys.withStore(database) { try await $0.list() }
            let formatter = ISO8601DateFormatter()
            print("id\tprefix\tapp\tcreated\trevoked\torigins")
            for key in keys {
                let origins = key.allowedOrigins.isEmpty ? "-" : key.allowedOrigins.joined(separator: ",")
                print("\(key.id)\t\(key.prefix)\t\(key.app)\t\(formatter.string(from: key.createdAt))\t\(key.revokedAt.map(formatter.string) ?? "-")\t\(origins)")
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Revoke a write key by full key, prefix or id.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The key, its prefix as `keys list` shows it, or its id.") var key: String

        func run() async throws {
            let count = try await Keys.withStore(database) { try await $0.revoke(key) }
            guard count > 0 else { throw ValidationError("no live key matches '\(key)'") }
            Console.info("revoked \(count) key(s)")
        }
    }

    static func withStore<T: Sendable>(_ database: DatabaseOptions, _ body: (WriteKeyStore) async throws -> T) async throws -> T {
        try await ConnectionPool.using(url: try database.resolvedURL()) { pool in
            try await body(WriteKeyStore(pool: pool, cacheTTL: .zero))
        }
    }
}
