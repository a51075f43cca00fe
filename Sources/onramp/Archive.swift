import ArgumentParser
import DataLifecycle
import Foundation
import Funnels
import LibPQ

/// `onramp archive run|restore|verify` (docs/lifecycle.md): old months of
/// the log to files, checked, and back.
struct ArchiveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "archive",
        abstract: "Move whole months older than the configured horizon to gzip files, and restore them.",
        subcommands: [Run.self, Restore.self, Verify.self])

    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run",
            abstract: "Archive every whole month received before the configuration's archive.keep_events, then drop it from the log.",
            discussion: "Each month is written, read back and checked before its partition is dropped; killed at any point, rerun it.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var configuration: ConfigurationOptions
        @Option(help: "Archive this month (YYYY-MM) again after a restore; it must be past the horizon.") var month: String?

        func run() throws {
            for line in try ArchiveRun.run(
                try configuration.load(), source: configuration.config, databaseURL: try database.resolvedURL(), month: month
            ) {
                print(line)
            }
        }
    }

    struct Restore: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "restore",
            abstract: "Append an archived month's messages back to the log; those already in it, or erased since, are left out.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var archive: ArchiveOptions
        @Option(help: "The month, YYYY-MM.") var month: String
        @Option(help: "Only this app's messages (repeatable).") var app: [String] = []

        func run() throws {
            let directory = try archive.resolvedDirectory()
            let c = try Connection.connect(try database.resolvedURL())
            let outcome = try ArchiveRestore(month: month, directory: directory, apps: app.isEmpty ? nil : Set(app)).run(c)
            print(
                "restored \(month): \(outcome.restored) of \(outcome.archived) archived messages appended, "
                    + "\(outcome.present) already in the log, \(outcome.keptOut) erased or suppressed since; "
                    + "the next onramp report recomputes the persons they touch")
        }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Read an archived month's files back and check them against its manifest.")
        @OptionGroup var archive: ArchiveOptions
        @Option(help: "The month, YYYY-MM (default: every month in the directory).") var month: String?

        func run() throws {
            let directory = try archive.resolvedDirectory()
            let months = try month.map { [$0] } ?? FileManager.default.contentsOfDirectory(atPath: directory)
                .filter { $0.count == 7 && FileManager.default.fileExists(atPath: "\(directory)/\($0)/\(ArchiveManifest.fileName)") }.sorted()
            for month in months {
                let (manifest, sha) = try ArchiveManifest.load(directory: directory, month: month)
                try manifest.verify(directory: directory)
                print("verified \(month): \(manifest.messages) messages in \(manifest.files.count) files, manifest sha256 \(sha.prefix(16))")
            }
        }
    }
}

/// Where the archive is: `--directory DIR`, else the configuration's `archive.directory`.
struct ArchiveOptions: ParsableArguments {
    @Option(help: "The archive directory (default: the configuration's archive.directory).") var directory: String?
    @OptionGroup var configuration: ConfigurationOptions

    func resolvedDirectory() throws -> String {
        if let directory { return directory }
        return try Self.settings(try configuration.load(), source: configuration.config).directory
    }

    /// The configuration's `archive:` block, its directory checked: there and writable.
    static func settings(_ configuration: FunnelConfiguration, source: String?) throws -> ArchiveSettings {
        let file = source ?? "the configuration"
        guard let settings = configuration.archive else {
            throw ValidationError("\(file): no archive: section (keep_events, directory); without one the log keeps every event")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: settings.directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ValidationError("\(file): archive.directory \(settings.directory) does not exist (make it, mode 0700, for the archive's files)")
        }
        guard access(settings.directory, W_OK | X_OK) == 0 else {
            throw ValidationError("\(file): archive.directory \(settings.directory) is not writable by this user")
        }
        return settings
    }
}

/// Archives every whole month past the configuration's horizon: what
/// `onramp archive run` and the nightly `onramp report` do; returns what it
/// says, line by line.
enum ArchiveRun {
    /// `month`: one month, restored earlier, archived again (it must be past the horizon).
    static func run(_ configuration: FunnelConfiguration, source: String?, databaseURL: String, month named: String? = nil) throws -> [String] {
        let settings = try ArchiveOptions.settings(configuration, source: source)
        let c = try Connection.connect(databaseURL)
        let (months, days) = switch settings.keepEvents {
        case .months(let months): (months, 0)
        case .days(let days): (0, days)
        }
        // The horizon from this process's clock, as the nightly job judges its windows.
        let now = Date()
        var due = try MonthArchive.due(c, keepMonths: months, keepDays: days, now: now)
        if let named {
            guard try MonthArchive.due(c, keepMonths: months, keepDays: days, now: now, includingRestored: true).contains(named) else {
                throw ValidationError("--month \(named): not a month of the log received more than \(settings.keepEvents) ago")
            }
            due = [named]
        }
        var lines: [String] = []
        if due.isEmpty { lines.append("archive: no whole month received more than \(settings.keepEvents) ago is left in the log") }
        for month in due {
            let outcome = try MonthArchive(month: month, directory: settings.directory).run(c)
            lines.append(
                "archived \(month): \(outcome.messages) messages in \(outcome.files) files (\(outcome.bytes) bytes), "
                    + "manifest sha256 \(outcome.manifestSHA256.prefix(16)), partition dropped")
        }
        let kept = try MonthArchive.defaultPartitionMessages(c, keepMonths: months, keepDays: days, now: now)
        if kept > 0 {
            lines.append(
                "note: events_default holds \(kept) messages received more than \(settings.keepEvents) ago, outside every month "
                    + "partition; they stay in the log (docs/lifecycle.md)")
        }
        return lines
    }
}
