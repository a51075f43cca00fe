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

    @Option(help: "Every funnel with one option: plain (as configured), strict, any, within, hold or attribution.")
    var variant: String = "plain"

    @OptionGroup var options: BenchOptions

    func validate() throws {
        guard EngineBenchmark.Variant(rawValue: variant) != nil else {
            throw ValidationError("--variant must be one of \(EngineBenchmark.Variant.allCases.map(\.rawValue).joined(separator: ", ")) (got '\(variant)')")
        }
    }

    func run() throws {
        let r = try EngineBenchmark(events: events, passes: passes, variant: EngineBenchmark.Variant(rawValue: variant) ?? .plain).run()
        if try options.printedJSON(r) { return }
        print(
            """
            events                       \(r.events) (\(r.persons) persons), best of \(r.passes) passes, funnels \(variant)
            evaluate                     \(String(format: "%.3f", r.evaluateSeconds)) s   \(String(format: "%.0f", r.evaluateNanosecondsPerEvent)) ns/event
            evaluate + tally + drop-off  \(String(format: "%.3f", r.allSeconds)) s   \(String(format: "%.0f", r.allNanosecondsPerEvent)) ns/event
            """)
    }
}
