import ArgumentParser

/// `onramp-bench`: the benchmarks and the fault suite's client. Tooling, built
/// as its own executable: the shipped `onramp` does not link any of it.
@main
struct OnrampBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "onramp-bench",
        abstract: "Benchmarks, reported as ratios to the raw limits measured in the same run; the fault suite's client.",
        subcommands: [BenchIngest.self, BenchReport.self, BenchExplore.self, BenchEngine.self, BenchAlerts.self, BenchAccess.self, BenchAudiences.self, BenchLifecycle.self, FaultClient.self])
}
