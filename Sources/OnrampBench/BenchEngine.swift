import ArgumentParser
import Benchmarks
import Foundation

/// `onramp-bench engine`: the funnel engine's CPU per event, in memory.
struct BenchEngine: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "engine", abstract: "Time the funnel engine alone on simulated history, in memory.")

    @Option(help: "Events of simulated history.")
    var events: Int = 300_000

    @Option(help: "Passes over it; the best is reported.")
    var passes: Int = 5

    @OptionGroup var options: BenchOptions

    func run() throws {
        let r = try EngineBenchmark(events: events, passes: passes).run()
        if try options.printedJSON(r) { return }
        print(
            """
            events                       \(r.events) (\(r.persons) persons), best of \(r.passes) passes
            evaluate                     \(String(format: "%.3f", r.evaluateSeconds)) s   \(String(format: "%.0f", r.evaluateNanosecondsPerEvent)) ns/event
            evaluate + tally + drop-off  \(String(format: "%.3f", r.allSeconds)) s   \(String(format: "%.0f", r.allNanosecondsPerEvent)) ns/event
            """)
    }
}
