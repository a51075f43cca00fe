import ArgumentParser
import Benchmarks
import Foundation
import Simulation

/// `onramp-bench audiences`: what keeping five audiences costs a night, and `onramp audiences run` between nights.
struct BenchAudiences: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audiences", abstract: "Time the nightly run with and without five audiences, and onramp audiences run.")

    @Option(help: "Events of history to write.")
    var events: Int = 1_000_000

    @Option(help: "Days the history spreads over; a day has events ÷ days of them, ten minutes a 144th of that.")
    var days: Int = 30

    @Option(help: "Rounds, each on fresh copies; medians are reported.")
    var rounds: Int = 3

    @Option(help: "The onramp binary to time (default: the one beside this one).")
    var onramp: String?

    @OptionGroup var options: BenchOptions

    func validate() throws {
        guard events > 0 else { throw ValidationError("--events must be at least 1 (got \(events))") }
        guard (1...3_650).contains(days) else { throw ValidationError("--days must be between 1 and 3650 (got \(days))") }
        guard (1...20).contains(rounds) else { throw ValidationError("--rounds must be between 1 and 20 (got \(rounds))") }
    }

    func run() async throws {
        let executable = onramp ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("onramp").path
        let bench = AudienceBenchmark(
            events: events, days: days, rounds: rounds, executable: executable, serverURL: options.serverURL,
            migrations: try options.migrationsDirectory(), log: { info($0) })
        let r = try await bench.run()
        if try options.printedJSON(r) { return }
        func fmt(_ x: Double, _ places: Int = 2) -> String { String(format: "%.\(places)f", x) }
        print(
            """
            events                              \(r.events) over \(r.days) days; the night's day \(r.dayEvents), ten minutes \(r.tenMinuteEvents) (medians of \(r.rounds) rounds)
            night, shipped funnels              \(fmt(r.nightSeconds)) s
            night, with five audiences          \(fmt(r.nightWithAudiencesSeconds)) s
            with ÷ without                      \(fmt(r.nightRatio))   (goal ≤ 1.2; by round \(r.nightRatios.map { fmt($0) }.joined(separator: ", ")))
            audiences run, nothing new          \(fmt(r.quietRunSeconds, 3)) s   (goal ≤ 0.1, the whole process; rounds \(r.quietRunSamples.map { fmt($0, 3) }.joined(separator: ", ")))
            audiences run, ten minutes' events  \(fmt(r.tenMinuteRunSeconds, 3)) s   (goal ≤ 1; rounds \(r.tenMinuteRunSamples.map { fmt($0, 3) }.joined(separator: ", ")); peak RSS \(fmt(r.tenMinutePeakRSSMegabytes)) MB)
            members after the night             \(r.members.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
            """)
    }
}
