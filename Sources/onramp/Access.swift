import Access
import ArgumentParser
import Foundation
import LibPQ

/// `onramp access grant|revoke|list|create-login`: which login reads which
/// apps through `analytics` (docs/access.md). Run as the owner.
struct AccessCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "access",
        abstract: "Give analysts' logins the apps they may read.",
        subcommands: [Grant.self, Revoke.self, List.self, CreateLogin.self])

    /// `--app APP` (repeatable) or `--all-apps`.
    struct Apps: ParsableArguments {
        @Option(help: "An app the login may read. Repeatable.") var app: [String] = []
        @Flag(help: "Every app, today's and those to come.") var allApps = false

        func validate() throws {
            guard allApps != !app.isEmpty else { throw ValidationError("name the apps: --app APP (repeatable) or --all-apps, not both") }
            if app.contains(where: \.isEmpty) { throw ValidationError("--app must not be empty") }
        }

        private var named: [String] { Array(Set(app)).sorted() }
        var selection: AppSelection { allApps ? .every : .apps(named) }
        var words: String { allApps ? "every app" : named.joined(separator: ", ") }
    }

    /// What `grant` and `revoke` change: a login's apps, in a database.
    struct Change: ParsableArguments {
        @OptionGroup var database: DatabaseOptions
        @Option(help: "The login (a PostgreSQL role).") var login: String
        @OptionGroup var apps: Apps
    }

    struct Grant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "grant", abstract: "Let a login read apps (from its next statement).")
        @OptionGroup var change: Change

        func run() async throws {
            let (login, apps) = (change.login, change.apps)
            let (added, notes) = try await AccessCommand.withConnection(change.database) { c in
                let added = try AppGrants.grant(c, login: login, apps.selection)
                let unknown = try AccessCommand.appsWithoutKey(c, apps.selection)
                return (added, (unknown.isEmpty ? [] : ["no write key names \(unknown.joined(separator: ", ")) yet"]) + (try AppGrants.notes(c, login: login)))
            }
            AccessCommand.say(added.isEmpty ? "'\(login)' held \(apps.words) already" : "'\(login)' may read \(apps.words)", notes: notes)
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Take apps from a login (from its next statement).")
        @OptionGroup var change: Change

        func run() async throws {
            let (login, apps) = (change.login, change.apps)
            let notes = try await AccessCommand.withConnection(change.database) { c in
                _ = try AppGrants.revoke(c, login: login, apps.selection)
                return try AppGrants.notes(c, login: login)
            }
            AccessCommand.say("'\(login)' may no longer read \(apps.words)", notes: notes)
        }
    }

    /// What was done, then what the operator should know about the login's grants.
    static func say(_ done: String, notes: [String]) {
        Console.info(done)
        for note in notes { Console.info("note: \(note)") }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the grants, one line per login and app.")
        @OptionGroup var database: DatabaseOptions
        @Option(help: "Only this login's grants.") var login: String?
        @Flag(help: "Print the grants as JSON.") var json = false

        func run() async throws {
            let grants = try await AccessCommand.withConnection(database) { c in try AppGrants.list(c, login: login) }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                encoder.dateEncodingStrategy = .iso8601
                print(String(decoding: try encoder.encode(grants), as: UTF8.self))
                return
            }
            let formatter = ISO8601DateFormatter()
            print("login\tapp\tgranted_at\tgranted_by")
            for grant in grants {
                print("\(grant.login)\t\(grant.app ?? "*")\t\(formatter.string(from: grant.grantedAt))\t\(grant.grantedBy)")
            }
        }
    }

    struct CreateLogin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create-login",
            abstract: "Make an analyst's login (read-only, statement timeout, search path) holding the apps given.",
            discussion: "The password is read from standard input, or from --password-file; never from the command line.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The login's name.") var name: String
        @OptionGroup var apps: Apps
        @Option(help: "A file holding the password (its first line).") var passwordFile: String?

        func run() async throws {
            let password = try readPassword()
            try await AccessCommand.withConnection(database) { c in
                try AppGrants.createLogin(c, name: name, password: password, apps.selection)
            }
            Console.info("made login '\(name)'; it may read \(apps.words)")
        }

        /// The first line of the file or of standard input, without its
        /// newline; asked for without echo when standard input is a terminal.
        func readPassword() throws -> String {
            let text: String
            if let passwordFile {
                do {
                    text = try String(contentsOfFile: passwordFile, encoding: .utf8)
                } catch {
                    throw ValidationError("--password-file \(passwordFile): \(error.localizedDescription)")
                }
            } else if isatty(STDIN_FILENO) == 1, let typed = getpass("password for \(name): ") {
                text = String(cString: typed)
            } else {
                text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            }
            let password = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            let trimmed = password.hasSuffix("\r") ? String(password.dropLast()) : password
            guard !trimmed.isEmpty else {
                throw ValidationError("no password: give it on standard input or in --password-file (its first line)")
            }
            return trimmed
        }
    }

    /// The apps named that no write key (live or revoked) names: a likely typo.
    static func appsWithoutKey(_ c: Connection, _ selection: AppSelection) throws -> [String] {
        guard case .apps(let apps) = selection else { return [] }
        let known = try c.query("SELECT DISTINCT app FROM write_keys WHERE app = ANY($1::text[])", [.textArray(apps)])
        let names = Set(try known.rows.map { try $0.decode(String.self, at: 0) })
        return apps.filter { !names.contains($0) }
    }

    /// Runs `body` on a connection to the database; a refusal (`AccessError`)
    /// reaches the terminal as its sentence, without the usage text.
    static func withConnection<T: Sendable>(_ database: DatabaseOptions, _ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await ConnectionPool.using(url: try database.resolvedURL()) { pool in try await pool.withConnection(body) }
    }
}
