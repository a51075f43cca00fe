import ArgumentParser
import Benchmarks
import Foundation
import Simulation

/// `onramp-bench report`: `onramp rebuild` and the incremental `onramp report` vs a raw scan of the log.
struct BenchReport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "report", abstract: "Time rebuild and the incremental report.")

    @Option(help: "Events of history to write.")
    var events: Int = 1_000_000

    @Option(help: "Days the history spreads over; the night's day has events ÷ days of them. 10 M over 300 days is 1 M over 30 days' traffic, over a history ten times as long.")
    var days: Int = 30

    @Option(help: "Times to run the raw scan, rebuild, SQL funnels and the nightly run, interleaved; medians are reported.")
    var rounds: Int = 3

    @Option(help: "How much devices use the app after onboarding: 0 for onboarding only, 1 for the simulator's model (most events), 2 for twice as busy.")
    var laterUse: Double = 1

    func validate() throws {
        guard events > 0 else { throw ValidationError("--events must be at least 1 (got \(events))") }
        guard (1...3_650).contains(days) else { throw ValidationError("--days must be between 1 and 3650 (got \(days))") }
        guard (0...10).contains(laterUse) else { throw ValidationError("--later-use must be from 0 to 10 (got \(laterUse))") }
        guard (1...20).contains(rounds) else { throw ValidationError("--rounds must be between 1 and 20 (got \(rounds))") }
        try options.checkKeptCopy(keepCopy)
        if let keepCopy {
            guard !ReportBenchmark.isReservedCopySuffix(keepCopy) else {
                throw ValidationError("--keep-copy '\(keepCopy)' names a copy the benchmark makes itself ('nightly', 'r1', 'r2', …): choose another")
            }
        }
    }

    @Option(help: "The onramp binary to time (default: the one beside this one).")
    var onramp: String?

    @Option(help: "With --database-url: leave a copy of the database as the incremental report finds it (the day appended), named after the bench database with this suffix, to time the nightly run again by hand.")
    var keepCopy: String?

    @OptionGroup var options: BenchOptions

    func run() async throws {
        let executable = onramp ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("onramp").path
        let bench = ReportBenchmark(
            events: events, days: days, laterUse: LaterUse(scale: laterUse), rounds: rounds, executable: executable,
            serverURL: options.serverURL, migrations: try options.migrationsDirectory(),
            keptCopySuffix: keepCopy, log: { info($0) })
        let r = try await bench.run()
        if try options.printedJSON(r) { return }
        print(
            """
            events                       \(r.events) over \(r.days) days   (scan, rebuild, SQL funnels and report: medians of \(r.rounds) interleaved rounds, ratios: median of the rounds' ratios; \(r.rounds == 1 ? "the report" : "each report") on a copy of the rebuilt database with the day appended)
            load (COPY, incl. ledger)    \(fmt(r.loadSeconds)) s   \(Int(Double(r.events) / r.loadSeconds)) events/s
            first rebuild (+ catalogue)  \(fmt(r.firstRebuildSeconds)) s   \(fmt(r.firstRebuildOverRebuild)) × the rounds' rebuild, peak RSS \(fmt(r.firstRebuildPeakRSSMegabytes)) MB (before the rounds: it also counts the event catalogue, once)
            raw scan (COPY TO STDOUT)    \(fmt(r.rawScanSeconds)) s   \(Int(Double(r.events) / r.rawScanSeconds)) events/s, \(r.rawScanBytes / 1_048_576) MB
            rebuild                      \(fmt(r.rebuildSeconds)) s   \(Int(r.rebuildEventsPerSecond)) events/s, peak RSS \(fmt(r.rebuildPeakRSSMegabytes)) MB
            SQL funnels (\(r.sqlFunnels.count) queries)   \(fmt(r.sqlFunnelSeconds)) s   \(r.sqlFunnels.map { "\($0.funnel) \(fmt($0.seconds)) s" }.joined(separator: ", "))
            one more day (\(r.dayEvents) events) report  \(fmt(r.incrementalSeconds)) s   peak RSS \(fmt(r.incrementalPeakRSSMegabytes)) MB, \(fmt(r.incrementalSeconds * 1e6 / Double(max(r.dayEvents, 1)), places: 1)) µs a day's event
            rounds: scan \(r.rawScanSamples.map(fmt).joined(separator: ", ")) s; rebuild \(r.rebuildSamples.map(fmt).joined(separator: ", ")) s; SQL funnels \(r.sqlFunnelSamples.map(fmt).joined(separator: ", ")) s; report \(r.incrementalSamples.map(fmt).joined(separator: ", ")) s
            rebuild ÷ raw scan           \(fmt(r.rebuildOverRawScan))   (goal ≤ 1.5; by round \(r.rebuildOverRawScanByRound.map(fmt).joined(separator: ", ")))
            rebuild ÷ SQL funnels        \(fmt(r.rebuildOverSQLFunnels))   (by round \(r.rebuildOverSQLFunnelsByRound.map(fmt).joined(separator: ", ")))
            incremental ÷ rebuild        \(fmt(r.incrementalOverRebuild, places: 3))   (no goal: a night's cost follows the day, compare runs with --days; by round \(r.incrementalOverRebuildByRound.map { fmt($0, places: 3) }.joined(separator: ", ")))
            """)
    }

    private func fmt(_ x: Double) -> String { fmt(x, places: 2) }
    private func fmt(_ x: Double, places: Int) -> String { String(format: "%.\(places)f", x) }
}
