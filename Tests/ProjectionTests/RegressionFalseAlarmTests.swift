import Benchmarks
import Funnels
import Simulation
import Testing

/// An A/A test of the regression check, the short form of `onramp-bench
/// alerts`: on stable simulated traffic (every story of the simulator off,
/// so no version, platform or period differs) every alert is a false alarm,
/// and a night's report, all five persons' funnels tested together, must raise none
/// on these fixed seeds. A planted drop is still found. The pipeline is the engine's, in
/// memory: the simulator's events, evaluated per device, tallied per cohort
/// day, checked as `onramp report` checks them.
@Suite struct RegressionFalseAlarmTests {
    /// The shipped funnels counting persons: the pipeline evaluates devices one by one.
    static let funnels = bundledConfiguration.funnels.filter { $0.aggregateBy == .person }

    @Test("stable traffic: no night of twelve raises a false alarm, all funnels tested together")
    func aaTest() throws {
        var alarms: [String] = []
        var tests = 0
        for seed in 1...12 {
            let night = AlertBenchmark.night(seed: UInt64(seed), funnels: Self.funnels, devices: 48_000)
            for (funnel, findings) in night.together {
                tests += findings.tested.count
                alarms += findings.regressions.map { "seed \(seed) \(funnel): \($0.kind.rawValue) \($0.step ?? $0.metric.rawValue) q \($0.qValue)" }
            }
        }
        #expect(tests >= 12 * Self.funnels.count * 8, "the checks must actually test: enough persons on both sides")
        #expect(alarms.isEmpty, "\(alarms)")
    }

    @Test("a bad week planted in every version (forma's quiz 10 points worse, the last 7 days) is a period regression, not a version one")
    func plantedWeek() throws {
        for seed in [UInt64(5), 6, 7] {
            let night = AlertBenchmark.night(seed: seed, funnels: Self.funnels, devices: 96_000, plants: [AlertBenchmark.defaultPlant])
            let found = try #require(night.together.first { $0.0 == "forma_onboarding" }?.1)
            #expect(found.regressions.contains { $0.kind == .period && $0.step == "onboarding_step_viewed (step=quiz)" && $0.difference < -0.05 })
            #expect(!found.regressions.contains { $0.kind == .version })
            #expect(night.together.allSatisfy { $0.0 == "forma_onboarding" || $0.1.regressions.isEmpty }, "only the planted funnel alerts")
        }
    }
}
