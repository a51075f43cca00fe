import ArgumentParser
import Foundation
import Funnels
import LibPQ
import DataLifecycle
import Projection

/// `onramp export`: an app's messages as the server stored them, to a file or standard output.
struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write an app's messages as the server stored them, as JSON lines or CSV (docs/lifecycle.md).",
        discussion: """
            By the UTC day the server received them, --from and --to included. Runs as any login that reads the app \
            (docs/access.md); an app it is not granted is refused.
            """)

    @OptionGroup var database: DatabaseOptions

    @Option(help: "The app.") var app: String

    @Option(help: "The first day (YYYY-MM-DD, UTC) the messages were received on (default: the first).")
    var from: String?

    @Option(help: "The last day (YYYY-MM-DD, UTC) the messages were received on (default: the last).")
    var to: String?

    @Option(help: "jsonl (one object per line) or csv.")
    var format: String = "jsonl"

    @Option(help: "The file to write (mode 0600, replaced only once the export is whole; default: standard output).")
    var out: String?

    @Flag(help: "No progress and no summary on standard error.")
    var quiet = false

    func validate() throws {
        guard !app.isEmpty else { throw ValidationError("--app must name an app") }
        for (flag, day) in [("--from", from), ("--to", to)] {
            if let day, CohortCalendar.dayNumber(ofText: day) == nil {
                throw ValidationError("\(flag) must be a day such as 2026-11-01 (got '\(day)')")
            }
        }
        if let from, let to, from > to { throw ValidationError("--from \(from) is after --to \(to)") }
        guard EventExport.Format(rawValue: format) != nil else {
            throw ValidationError("--format must be \(EventExport.Format.allCases.map(\.rawValue).joined(separator: " or ")) (got '\(format)')")
        }
    }

    func run() throws {
        let day: Int64 = 86_400_000_000
        let export = EventExport(
            app: app, from: from.flatMap(CohortCalendar.dayNumber(ofText:)).map { $0 * day },
            until: to.flatMap(CohortCalendar.dayNumber(ofText:)).map { ($0 + 1) * day },
            format: EventExport.Format(rawValue: format) ?? .jsonl)
        let output = try ExportOutput(path: out)
        let progress = Progress(label: "export \(app)", total: nil, enabled: !quiet)
        let connection = try Connection.connect(try database.resolvedURL())
        let count: Int
        do {
            count = try export.run(connection) { chunk in
                try output.write(chunk)
                // A message is a chunk (a row) of the copy.
                progress.advance(by: 1)
            }
            try output.finish()
        } catch {
            output.abandon()
            if let refused = error as? EventExport.Refused { throw ValidationError(refused.description) }
            throw error
        }
        progress.finish()
        if !quiet {
            let days = [from.map { "from \($0)" }, to.map { "to \($0)" }].compactMap { $0 }.joined(separator: " ")
            Console.info("exported \(count) messages of app \(app)\(days.isEmpty ? "" : " received \(days)") to \(out ?? "standard output")")
        }
    }
}

/// Where an export goes: standard output, or a file written beside its
/// path (mode 0600: it holds what persons sent) and moved into place only
/// once whole, so a failed export never leaves a partial file behind.
final class ExportOutput {
    private let path: String?
    private let partial: String?
    private let file: UnsafeMutablePointer<FILE>

    init(path: String?) throws {
        self.path = path
        guard let path else {
            // Its own stream on descriptor 1: nothing else of the command writes there.
            guard let file = fdopen(STDOUT_FILENO, "w") else { throw ValidationError("cannot write standard output") }
            partial = nil
            self.file = file
            return
        }
        let partial = path + ".partial"
        let descriptor = open(partial, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0, let file = fdopen(descriptor, "w") else {
            throw ValidationError("--out: cannot write \(path) (\(String(cString: strerror(errno))))")
        }
        self.partial = partial
        self.file = file
    }

    func write(_ chunk: UnsafeRawBufferPointer) throws {
        guard let base = chunk.baseAddress, chunk.count > 0 else { return }
        guard fwrite(base, 1, chunk.count, file) == chunk.count else {
            throw ValidationError("--out: writing \(path ?? "standard output") failed (\(String(cString: strerror(errno))))")
        }
    }

    func finish() throws {
        guard fflush(file) == 0 else {
            throw ValidationError("--out: writing \(path ?? "standard output") failed (\(String(cString: strerror(errno))))")
        }
        guard let partial, let path else { return }
        guard fsync(fileno(file)) == 0, fclose(file) == 0, rename(partial, path) == 0 else {
            throw ValidationError("--out: cannot finish \(path) (\(String(cString: strerror(errno))))")
        }
    }

    func abandon() {
        guard let partial else { return }
        fclose(file)
        unlink(partial)
    }
}
