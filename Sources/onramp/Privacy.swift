import ArgumentParser
import Foundation
import Privacy
import Projection
import Reports
import DataLifecycle
import Funnels
import LibPQ

/// `onramp privacy erase|unsuppress|list` (docs/privacy.md).
struct PrivacyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "privacy",
        abstract: "Erase persons on request, keep them out, and list what was asked.",
        subcommands: [Erase.self, Reapply.self, Unsuppress.self, List.self])

    /// The ids a request names: on the command line and in files, one per line.
    struct Ids: ParsableArguments {
        @Option(help: "The app the person's events belong to.") var app: String
        @Option(name: .customLong("user-id"), help: "A userId; the person it is, with every device they used. Repeatable.")
        var userIds: [String] = []
        @Option(
            name: .customLong("anonymous-id"),
            help: "An anonymousId; the whole person it belongs to (its earliest user), or the device alone when it never signed in. Repeatable.")
        var anonymousIds: [String] = []
        @Option(help: "A file of userIds, one per line.") var file: String?
        @Option(help: "A file of anonymousIds, one per line.") var anonymousFile: String?
        @Option(help: "Who asked (the operator or ticket), kept in the audit trail.") var requestedBy: String

        func validate() throws {
            guard !app.isEmpty else { throw ValidationError("--app must not be empty") }
            guard !requestedBy.isEmpty else { throw ValidationError("--requested-by must not be empty") }
            guard !userIds.isEmpty || !anonymousIds.isEmpty || file != nil || anonymousFile != nil else {
                throw ValidationError("name at least one person: --user-id, --anonymous-id, --file or --anonymous-file")
            }
            if (userIds + anonymousIds).contains(where: \.isEmpty) { throw ValidationError("--user-id and --anonymous-id must not be empty") }
        }

        /// The user ids and anonymous ids named, each once.
        func resolved() throws -> (users: [String], anonymous: [String]) {
            func lines(_ path: String?, option: String) throws -> [String] {
                guard let path else { return [] }
                guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                    throw ValidationError("\(option) \(path): cannot be read as UTF-8 text")
                }
                return text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            }
            // Without surrounding blanks, as the files' lines are.
            let users = userIds.map { $0.trimmingCharacters(in: .whitespaces) } + (try lines(file, option: "--file"))
            let anonymous = anonymousIds.map { $0.trimmingCharacters(in: .whitespaces) } + (try lines(anonymousFile, option: "--anonymous-file"))
            guard !users.isEmpty || !anonymous.isEmpty else { throw ValidationError("the files name no id") }
            return (Array(Set(users)).sorted(), Array(Set(anonymous)).sorted())
        }
    }

    struct Erase: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "erase",
            abstract: "Erase persons from the log and everything built from it, then recompute what counted them.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var configuration: ConfigurationOptions
        @OptionGroup var ids: Ids
        @Flag(help: "Keep them out afterwards: their later messages are answered but not stored.") var suppress = false
        @Flag(help: "Print what was done as JSON.") var json = false
        @Option(help: "Seconds to wait for a nightly run in progress to finish.") var wait: Int = 600
        @OptionGroup var metrics: MetricsFileOptions

        func validate() throws {
            guard wait >= 0 else { throw ValidationError("--wait must be 0 or more seconds (got \(wait))") }
        }

        func run() async throws {
            try await metrics.recording(job: "privacy_erase") { try await erase() }
        }

        /// Erases and says what went; returns it, for `--metrics-file`.
        private func erase() async throws -> [JobMetricsText.Value] {
            let (users, anonymous) = try ids.resolved()
            let erasure = Erasure(
                app: ids.app, userIds: users, anonymousIds: anonymous, requestedBy: ids.requestedBy, suppress: suppress,
                lockWait: .seconds(wait))
            let configured = try configuration.load()
            let job = ProjectionJob(configuration: configured, showProgress: false)
            let result = try await erasure.run(job, databaseURL: try database.resolvedURL())
            let archived = try ArchivedErasure.run(
                result, users: users, anonymous: anonymous, app: ids.app, suppressed: suppress, configured: configured,
                databaseURL: try database.resolvedURL())
            let values = [
                JobMetricsText.Value("persons_erased", "User ids and devices the erasure removed.", result.users.count + result.devices.count),
                JobMetricsText.Value("events_erased", "Events the erasure removed from the log.", result.removed["events"] ?? 0),
            ]
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                print(String(decoding: try encoder.encode(result), as: UTF8.self))
                return values
            }
            print("request \(result.requestId): erased \(result.users.count) user(s) and \(result.devices.count) device(s) of app '\(ids.app)' in \(String(format: "%.2f", result.seconds)) s")
            for (table, rows) in result.removed.sorted(by: { $0.key < $1.key }) { print("  \(table.padding(toLength: 26, withPad: " ", startingAt: 0)) \(rows)") }
            if !result.sharedDevices.isEmpty {
                print("  \(result.sharedDevices.count) device(s) also used by another user: that user's events stayed, the device is not suppressed")
            }
            if suppress { print("  suppressed: their later messages are answered and not stored") }
            for (directory, outcome) in archived {
                print("  archive \(directory): \(outcome.messages) message(s) erased from \(outcome.files) file(s)"
                      + (outcome.months.isEmpty ? "" : " of \(outcome.months.joined(separator: ", "))") + "; the erasure is in its journal")
            }
            return values
        }
    }

    struct Reapply: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reapply",
            abstract: "After a backup is restored: erase again every person the archive's erasure journal names that the database holds.",
            discussion: """
                The journal (erasures.journal in the archive directory) holds each erasure's ids as keyed hashes; the restored \
                database's ids are hashed with its own key and matched. Each match is erased again, and suppressed again when \
                it was. Run it before the servers take traffic again.
                """)
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var configuration: ConfigurationOptions
        @Option(help: "The archive directory holding erasures.journal.") var journal: String
        @Option(help: "Seconds to wait for a nightly run in progress to finish.") var wait: Int = 600

        func run() async throws {
            let entries = try Journal(directory: journal).entries()
            let url = try database.resolvedURL()
            let matches = try Journal.matches(try Connection.connect(url), entries: entries)
            let job = ProjectionJob(configuration: try configuration.load(), showProgress: false)
            for match in matches {
                let erasure = Erasure(
                    app: match.entry.app, userIds: match.userIds, anonymousIds: match.anonymousIds,
                    requestedBy: "reapply of request \(match.entry.requestId) (\(match.entry.at))", suppress: match.entry.suppressed,
                    lockWait: .seconds(wait))
                let result = try await erasure.run(job, databaseURL: url)
                print("request \(match.entry.requestId) of app '\(match.entry.app)' applied again as request \(result.requestId): "
                      + "\(result.removed["events"] ?? 0) event(s) of \(result.users.count) user(s) and \(result.devices.count) device(s) erased"
                      + (match.entry.suppressed ? ", suppressed" : ""))
            }
            print("reapplied \(matches.count) of \(entries.count) erasure(s) in the journal; the others name nobody this database holds")
        }
    }

    struct Unsuppress: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "unsuppress", abstract: "Let suppressed ids be stored again.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var ids: Ids

        func run() async throws {
            let (users, anonymous) = try ids.resolved()
            let done = try await PrivacyRequests.unsuppress(
                try database.resolvedURL(), app: ids.app, userIds: users, anonymousIds: anonymous, requestedBy: ids.requestedBy)
            print("request \(done.requestId): \(done.lifted) suppressed id(s) of app '\(ids.app)' lifted")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "The audit trail of privacy requests, newest first (no personal data).")
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let entries = try await PrivacyRequests.list(try database.resolvedURL())
            let time = ISO8601DateFormatter()
            print("id  kind        app          requested at          by            ids  suppressed  completed at          removed")
            for e in entries {
                let removed = e.removed.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
                print([
                    String(e.id), e.kind, e.app, time.string(from: e.requestedAt), e.requestedBy, String(e.ids), e.suppressed ? "yes" : "no",
                    e.completedAt.map { time.string(from: $0) } ?? "pending", removed,
                ].joined(separator: "  "))
            }
        }
    }
}

/// The erasure's reach into the archive: every archive directory the
/// configuration names or a month was archived to (docs/lifecycle.md).
enum ArchivedErasure {
    static func run(
        _ result: Erasure.Result, users: [String], anonymous: [String], app: String, suppressed: Bool, configured: FunnelConfiguration,
        databaseURL: String
    ) throws -> [(String, ArchiveErasure.Outcome)] {
        let c = try Connection.connect(databaseURL)
        var directories = Set(try c.query("SELECT DISTINCT directory FROM archived_months").rows.map { try $0.decode(String.self, at: 0) })
        // The configured one once it exists: an erasure before the first archive has nothing there.
        if let directory = configured.archive?.directory, FileManager.default.fileExists(atPath: directory) { directories.insert(directory) }
        return try directories.sorted().map { directory in
            let ids = Set(result.users + result.devices + users + anonymous)
            return (directory, try ArchiveErasure(
                app: app, requestId: result.requestId, ids: ids, users: Set(result.users + users), suppressed: suppressed,
                directory: directory
            ).run(c))
        }
    }
}
