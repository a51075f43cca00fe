import ArgumentParser
import Benchmarks
import Foundation

/// `onramp-bench alerts`: false alarms per night on stable traffic, and a planted drop found.
struct BenchAlerts: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "alerts",
        abstract: "Count the nights whose report raises a false regression alert on stable traffic, and those finding a planted drop.")

    @Option(help: "Nights of stable traffic (every story of the simulator off).")
    var seeds: Int = 300

    @Option(help: "Nights with forma's quiz planted 10 points worse in the last 7 days.")
    var plantedSeeds: Int = 50

    @Option(help: "Simulated devices a night (40 days of traffic): about 1,000 persons a week reach forma's quiz.")
    var devices: Int = 192_000

    @Option(help: "Every funnel's alerts.alpha in place of the configured one.")
    var alpha: Double?

    @OptionGroup var options: BenchOptions

    func validate() throws {
        guard seeds >= 1, plantedSeeds >= 1, devices >= 1_000 else {
            throw ValidationError("--seeds and --planted-seeds must be at least 1 and --devices at least 1000")
        }
        if let alpha, !(alpha > 0 && alpha < 1) { throw ValidationError("--alpha must be between 0 and 1 (got \(alpha))") }
    }

    func run() throws {
        let r = try AlertBenchmark(stableSeeds: seeds, plantedSeeds: plantedSeeds, devices: devices, alpha: alpha).run { info($0) }
        if try options.printedJSON(r) { return }
        func share(_ n: Int, _ of: Int) -> String { String(format: "%.1f %%", 100 * Double(n) / Double(max(1, of))) }
        print(
            """
            stable nights                \(r.stableNights)
            with a false alarm           \(r.falseNights) (\(share(r.falseNights, r.stableNights))), the report's funnels tested together
            funnel by funnel             \(r.falseNightsFunnelByFunnel) (\(share(r.falseNightsFunnelByFunnel, r.stableNights)))
            planted nights               \(r.plantedNights), the drop found on \(r.found) (\(share(r.found, r.plantedNights))); persons recent / baseline \(r.plantedPersons.map(String.init).joined(separator: " / "))
            seconds                      \(String(format: "%.0f", r.seconds))
            """)
        for alarm in r.falseAlarms { print("false alarm: " + alarm) }
    }
}
