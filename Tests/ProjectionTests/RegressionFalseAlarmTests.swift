import Foundation
import Funnels
import OnrampClient
import Simulation
import Testing

/// An A/A test of the regression check: on stable simulated traffic (the
/// ops, umuve and forma flows, whose journeys depend neither on the day nor
/// on the app version) every difference is chance, so any alert is a false
/// alarm. Over many seeds the share of funnel checks raising one must stay
/// at or below `alpha`. The pipeline is the engine's, in memory: the
/// simulator's events, evaluated per device, tallied per cohort day, checked.
@Suite struct RegressionFalseAlarmTests {
    static let apps: Set<String> = ["ops", "umuve", "forma"]

    @Test("stable traffic: the share of funnel checks with any false alarm stays at or below alpha")
    func aaTest() throws {
        let seeds = Int(ProcessInfo.processInfo.environment["ONRAMP_AA_SEEDS"] ?? "") ?? 12
        let funnels = bundledConfiguration.funnels.filter { Self.apps.contains($0.app) }
        var checks = 0, alarmed = 0, seedsAlarmed = 0, tests = 0
        var alarms: [String] = []
        for seed in 1...seeds {
            let found = try Self.check(seed: UInt64(seed), funnels: funnels)
            var any = false
            for (funnel, findings) in found {
                checks += 1
                tests += findings.tested.count
                if !findings.regressions.isEmpty {
                    alarmed += 1
                    any = true
                    alarms += findings.regressions.map { "seed \(seed) \(funnel): \($0.kind.rawValue) \($0.step ?? $0.metric.rawValue) q \($0.qValue)" }
                }
            }
            if any { seedsAlarmed += 1 }
        }
        let alpha = AlertSettings().alpha
        print("A/A: \(seeds) seeds × \(funnels.count) funnels = \(checks) checks (\(tests) tests): \(alarmed) with a false alarm "
              + "(\(String(format: "%.1f", 100 * Double(alarmed) / Double(checks)))%), \(seedsAlarmed) seeds with any "
              + "(\(String(format: "%.1f", 100 * Double(seedsAlarmed) / Double(seeds)))%); alpha \(alpha)")
        for alarm in alarms { print("A/A: " + alarm) }
        #expect(tests >= checks * 8, "the checks must actually test: enough persons on both sides")
        #expect(Double(alarmed) / Double(checks) <= alpha)
    }

    @Test("a bad week planted in every version (forma's quiz 10 points worse, the last 7 days) is a period regression, not a version one")
    func plantedWeek() throws {
        let funnels = bundledConfiguration.funnels.filter { $0.app == "forma" }
        let plant = PlantedRegression(app: "forma", version: "*", step: "quiz", points: 10, days: 7)
        let found = try #require(try Self.check(seed: 5, funnels: funnels, plants: [plant]).first?.1)
        for change in found.regressions {
            print("bad week: \(change.kind.rawValue) \(change.step ?? change.metric.rawValue): \(change.baseline.label) \(change.baseline.value ?? .nan) → \(change.recent.label) \(change.recent.value ?? .nan), q \(change.qValue)")
        }
        #expect(found.regressions.contains { $0.kind == .period && $0.step == "onboarding_step_viewed (step=quiz)" && $0.difference < -0.05 })
        #expect(!found.regressions.contains { $0.kind == .version })
    }

    /// One seed's history of 40 days, ending two days ago (all days closed), checked per funnel.
    static func check(seed: UInt64, funnels: [Funnel], plants: [PlantedRegression] = []) throws -> [(String, RegressionFindings)] {
        let now = Date(timeIntervalSince1970: 1_795_000_000)
        let clock = Int64(now.timeIntervalSince1970 * 1_000_000)
        var tallies: [String: [String: FunnelTally]] = [:]
        let shapes = Dictionary(uniqueKeysWithValues: funnels.map { ($0.name, FunnelTally.Shape($0)) })
        HistoryGenerator.devices(
            count: 36_000, from: now.addingTimeInterval(-42 * 86_400), to: now.addingTimeInterval(-2 * 86_400), seed: seed,
            apps: Set(funnels.map(\.app)), plants: plants, laterUse: LaterUse(scale: 0)  // the funnels' persons only, as sized
        ) { device in
            let context = flatten(.object(device.context), prefix: "context")
            let events = device.events.enumerated().map { n, e in
                FunnelEvent(
                    messageId: "\(n)", kind: EventKind(rawValue: e.type) ?? .track, name: e.name, timestamp: e.timestamp,
                    attributes: context.merging(flatten(.object(e.properties), prefix: "properties")) { a, _ in a })
            }
            for funnel in funnels where funnel.app == device.app {
                let outcome = FunnelEvaluator.evaluate(events: events, funnel: funnel, now: clock)
                guard let start = outcome.startTime, let shape = shapes[funnel.name] else { continue }
                let day = CohortCalendar.day(of: start, in: .gmt)
                tallies[funnel.name, default: [:]][day, default: FunnelTally(funnel: funnel)]
                    .add(outcome, shape: shape, cohortDay: day, timeZone: .gmt)
            }
        }
        return funnels.map { funnel in
            let newest = CohortCalendar.newestClosedDay(now: clock, windowMicroseconds: funnel.windowMicroseconds, in: .gmt)
            return (funnel.name, Regressions.find(funnel: funnel, days: tallies[funnel.name] ?? [:], newestClosedDay: newest))
        }
    }

    /// `context: {"app": {"version": "3.4.0"}}` -> `["context.app.version": "3.4.0"]`; numbers as the engine compares them.
    static func flatten(_ value: JSONValue, prefix: String) -> [String: String] {
        var out: [String: String] = [:]
        func walk(_ value: JSONValue, _ path: String) {
            switch value {
            case .object(let nested): for (key, inner) in nested { walk(inner, path + "." + key) }
            case .string(let text): out[path] = text
            case .number(let number): out[path] = number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
            case .bool(let flag): out[path] = flag ? "true" : "false"
            case .null, .array: break
            }
        }
        walk(value, prefix)
        return out
    }
}
