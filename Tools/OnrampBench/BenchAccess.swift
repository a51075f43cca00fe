import ArgumentParser
import Benchmarks
import Foundation

/// `onramp-bench access`: what per-app grants cost a login's queries (BENCHMARKS.md).
struct BenchAccess: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "access",
        abstract: "Time sql/examples and the explorer's first query as the analyst, a login granted the four apps, and a login granted one.")

    @Option(help: "Events of history to write (over 30 days).")
    var events: Int = 1_000_000

    @Option(help: "Interleaved rounds; the median of each is reported.")
    var rounds: Int = 5

    @Option(help: "The onramp binary (default: the one beside this one).")
    var onramp: String?

    @OptionGroup var options: BenchOptions

    func validate() throws {
        guard events > 0 else { throw ValidationError("--events must be at least 1 (got \(events))") }
        guard (1...50).contains(rounds) else { throw ValidationError("--rounds must be between 1 and 50 (got \(rounds))") }
    }

    func run() async throws {
        let executable = onramp ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("onramp").path
        let migrations = try options.migrationsDirectory()
        let bench = AccessBenchmark(
            events: events, rounds: rounds, executable: executable, serverURL: options.serverURL, migrations: migrations,
            examples: migrations.deletingLastPathComponent().appendingPathComponent("examples"), log: { info($0) })
        let r = try await bench.run()
        if try options.printedJSON(r) { return }
        var lines = ["events \(r.events), \(r.rounds) interleaved rounds; medians in seconds", "query\tanalyst\tfour apps\t÷\tone app\t÷"]
        for t in r.timings {
            lines.append(
                "\(t.query)\t\(fmt(t.analystSeconds))\t\(fmt(t.fourAppsSeconds))\t\(String(format: "%.2f", t.fourAppsRatio))"
                    + "\t\(t.oneAppSeconds.map(fmt) ?? "–")\t\(t.oneAppRatio.map { String(format: "%.2f", $0) } ?? "–")")
        }
        lines.append(String(format: "sum of medians: four apps ÷ analyst %.3f, one app ÷ analyst on its app %.3f", r.fourAppsRatio, r.oneAppRatio))
        print(lines.joined(separator: "\n"))
    }

    private func fmt(_ x: Double) -> String { String(format: "%.3f", x) }
}
