import ArgumentParser
import Benchmarks
import Foundation

/// `onramp-bench lifecycle`: a month archived and exported against `COPY … TO | gzip -1` (BENCHMARKS.md).
struct BenchLifecycle: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lifecycle",
        abstract: "Archive, restore and export a month of the log, against COPY of the same rows through gzip -1.")

    @Option(help: "Events in the log.") var events: Int = 1_000_000
    @Option(help: "Of them, events received in the archived month (default: a tenth).") var monthEvents: Int?
    @Option(help: "Interleaved rounds; medians are reported.") var rounds: Int = 3
    @Option(help: "With --database-url: leave a copy of the history as written (the month in the log), named after the bench database with this suffix.")
    var keepCopy: String?
    @OptionGroup var options: BenchOptions

    func validate() throws {
        guard events > 0 else { throw ValidationError("--events must be at least 1 (got \(events))") }
        if let monthEvents, !(31...events).contains(monthEvents) {
            throw ValidationError("--month-events must be between 31 and --events (got \(monthEvents))")
        }
        guard (1...20).contains(rounds) else { throw ValidationError("--rounds must be between 1 and 20 (got \(rounds))") }
        try options.checkKeptCopy(keepCopy)
    }

    func run() async throws {
        let bench = LifecycleBenchmark(
            events: events, monthEvents: monthEvents ?? max(31, events / 10), rounds: rounds, serverURL: options.serverURL,
            migrations: try options.migrationsDirectory(), keptCopySuffix: keepCopy, log: { info($0) })
        let r = try await bench.run()
        if try options.printedJSON(r) { return }
        print(String(format: """
            events %d, of them %d in the month; medians of %d rounds
            copy | gzip -1   %.2f s  (%d bytes)
            export (jsonl)   %.2f s  floor ÷ export %.2f
            export (csv)     %.2f s  floor ÷ export %.2f
            archive          %.2f s  floor ÷ archive %.2f  (%d bytes)
            restore          %.2f s
            """, r.events, r.monthEvents, r.rounds, r.copyGzipSeconds, r.copyGzipBytes, r.exportSeconds, r.exportRatio, r.exportCSVSeconds, r.exportCSVRatio,
            r.archiveSeconds, r.archiveRatio, r.archiveBytes, r.restoreSeconds))
    }
}
