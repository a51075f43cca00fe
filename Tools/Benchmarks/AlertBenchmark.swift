import Foundation
public import Funnels
public import Simulation

/// `onramp-bench alerts`: how often a night's report cries wolf, and how often
/// it finds a real drop. Each night is a seed's 40 days of simulated traffic
/// ending two days before the clock (every day closed), evaluated by the
/// engine in memory, tallied per cohort day and checked as `onramp report`
/// checks it: every funnel's regressions, tested together
/// (`Regressions.acrossReport`). Stable nights have every story of the
/// simulator off, so no version and no period differs and any alert is
/// false; planted nights add a drop (`PlantedRegression`) that must be found.
public struct AlertBenchmark: Sendable {
    public struct Result: Sendable, Codable {
        public var stableNights: Int
        /// Stable nights with any regression alert, the report's funnels tested together.
        public var falseNights: Int
        /// The same nights with each funnel tested alone, as before: for comparison.
        public var falseNightsFunnelByFunnel: Int
        public var plantedNights: Int
        /// Planted nights on which the planted step's period regression was found.
        public var found: Int
        /// The planted step's persons at its base, recent and baseline side, on the first planted night.
        public var plantedPersons: [Int]
        /// One line per false alarm: seed, funnel, what.
        public var falseAlarms: [String]
        public var seconds: Double
    }

    public var stableSeeds: Int
    public var plantedSeeds: Int
    public var devices: Int
    public var plant: PlantedRegression
    /// Every funnel's `alerts.alpha`, in place of the configured one (nil: as configured).
    public var alpha: Double?

    /// forma's quiz (converting about 85 %) 10 points worse in the last 7 days, in every version.
    public static let defaultPlant = PlantedRegression(app: "forma", version: "*", step: "quiz", points: 10, days: 7)
    /// The planted change as the report names it.
    static let plantedStep = "onboarding_step_viewed (step=quiz)"

    public init(
        stableSeeds: Int = 300, plantedSeeds: Int = 50, devices: Int = 192_000, plant: PlantedRegression = Self.defaultPlant, alpha: Double? = nil
    ) {
        self.alpha = alpha
        self.stableSeeds = stableSeeds
        self.plantedSeeds = plantedSeeds
        self.devices = devices
        self.plant = plant
    }

    public func run(log: (String) -> Void = { _ in }) throws -> Result {
        let started = Date()
        var configuration = try FunnelConfiguration.default()
        if let alpha { for index in configuration.funnels.indices { configuration.funnels[index].alerts.alpha = alpha } }
        var result = Result(
            stableNights: 0, falseNights: 0, falseNightsFunnelByFunnel: 0, plantedNights: 0, found: 0, plantedPersons: [],
            falseAlarms: [], seconds: 0)
        for seed in 1...max(1, stableSeeds) {
            let night = Self.night(seed: UInt64(seed), funnels: configuration.funnels, devices: devices)
            result.stableNights += 1
            let alarms = night.together.flatMap { funnel, findings in
                findings.regressions.map { "seed \(seed) \(funnel): \($0.kind.rawValue) \($0.step ?? $0.metric.rawValue), q \($0.qValue)" }
            }
            if !alarms.isEmpty { result.falseNights += 1 }
            result.falseAlarms += alarms
            if night.alone.contains(where: { !$0.1.regressions.isEmpty }) { result.falseNightsFunnelByFunnel += 1 }
            if seed % 50 == 0 { log("\(seed) stable nights, \(result.falseNights) with a false alarm") }
        }
        for seed in 1...max(1, plantedSeeds) {
            let night = Self.night(seed: UInt64(10_000 + seed), funnels: configuration.funnels, devices: devices, plants: [plant])
            result.plantedNights += 1
            let found = night.together.first { $0.0 == "\(plant.app)_onboarding" }?.1.regressions.first {
                $0.kind == .period && $0.step == Self.plantedStep
            }
            if found != nil { result.found += 1 }
            if result.plantedPersons.isEmpty, let tested = night.together.first(where: { $0.0 == "\(plant.app)_onboarding" })?.1.tested
                .first(where: { $0.kind == .period && $0.step == Self.plantedStep }) {
                result.plantedPersons = [tested.recent.persons, tested.baseline.persons]
            }
        }
        result.seconds = Date().timeIntervalSince(started)
        return result
    }

    /// One night's findings per funnel: tested together, as the report does, and each funnel alone.
    /// Devices are evaluated one by one, so funnels counting groups are left out.
    public static func night(
        seed: UInt64, funnels: [Funnel], devices: Int, plants: [PlantedRegression] = []
    ) -> (together: [(String, RegressionFindings)], alone: [(String, RegressionFindings)]) {
        let funnels = funnels.filter { $0.aggregateBy == .person }
        let now = Date(timeIntervalSince1970: 1_795_000_000)
        let clock = Int64(now.timeIntervalSince1970 * 1_000_000)
        let paths = funnels.reduce(into: Set<String>()) { $0.formUnion($1.referencedPaths) }
        let byApp = Dictionary(grouping: funnels, by: \.app)
        let shapes = Dictionary(funnels.map { ($0.name, FunnelTally.Shape($0)) }) { first, _ in first }
        var tallies: [String: [String: FunnelTally]] = [:]
        HistoryGenerator.devices(
            count: devices, from: now.addingTimeInterval(-42 * 86_400), to: now.addingTimeInterval(-2 * 86_400), seed: seed,
            plants: plants, stories: false, laterUse: LaterUse(scale: 0), groupCalls: false  // the funnels' persons only
        ) { device in
            let events = EngineBenchmark.funnelEvents(of: device, paths: paths)
            for funnel in byApp[device.app] ?? [] {
                let outcome = FunnelEvaluator.evaluate(events: events, funnel: funnel, now: clock)
                guard let start = outcome.startTime, let shape = shapes[funnel.name] else { continue }
                let day = CohortCalendar.day(of: start, in: .gmt)
                tallies[funnel.name, default: [:]][day, default: FunnelTally(funnel: funnel)]
                    .add(outcome, shape: shape, cohortDay: day, timeZone: .gmt)
            }
        }
        let alone = funnels.map { funnel in
            let newest = CohortCalendar.newestClosedDay(now: clock, windowMicroseconds: funnel.windowMicroseconds, in: .gmt)
            return (funnel.name, Regressions.find(funnel: funnel, days: tallies[funnel.name] ?? [:], newestClosedDay: newest))
        }
        let together = Regressions.acrossReport(alone.map(\.1), settings: funnels.map(\.alerts))
        return (Array(zip(funnels.map(\.name), together)), alone)
    }
}
