import Foundation
import Funnels
import OnrampClient
import Simulation

/// The funnel engine alone, in memory: the simulator's history, already read
/// into per-person events, evaluated for every configured funnel with what
/// the nightly job computes per person (the outcome, the day tally, the
/// drop-off facts and counts). No database and no decoding, so it isolates
/// the job's own CPU per event, which the rebuild's ratio to a raw scan is
/// most sensitive to; the best of several passes is reported, as the
/// machine's noise only ever adds time.
public struct EngineBenchmark: Sendable {
    public struct Result: Sendable, Codable {
        public var events: Int
        public var persons: Int
        public var passes: Int
        /// Best pass, seconds: evaluation only, then everything per person.
        public var evaluateSeconds: Double
        public var allSeconds: Double
        public var evaluateNanosecondsPerEvent: Double { evaluateSeconds * 1e9 / Double(events) }
        public var allNanosecondsPerEvent: Double { allSeconds * 1e9 / Double(events) }
    }

    /// The funnel options every configured funnel is run with (docs/funnels.md).
    public enum Variant: String, Sendable, CaseIterable, Codable {
        /// As configured: `ordered`, one window.
        case plain
        /// `order: strict`.
        case strict
        /// `order: any`.
        case any
        /// `within:` a quarter of the window on every step after the first.
        case within
        /// `hold: [context.os.name]` (one value per device: the levels stay, the work is the option's).
        case hold
        /// `attribution: last_step` and an exclusion of `help_opened` between steps 1 and 2.
        case attribution

        func apply(to funnel: inout Funnel) {
            switch self {
            case .plain: break
            case .strict: funnel.order = .strict
            case .any: funnel.order = .any
            case .within:
                for index in funnel.requiredStepIndices.dropFirst() { funnel.steps[index].within = funnel.windowSeconds / 4 }
            case .hold: funnel.hold = ["context.os.name"]
            case .attribution:
                funnel.attribution = .lastStep
                if funnel.steps.count > 1 { funnel.exclusions.append(Exclusion(.event("help_opened"), between: 0...1)) }
            }
        }
    }

    public var events: Int
    public var passes: Int
    public var variant: Variant

    public init(events: Int, passes: Int, variant: Variant = .plain) {
        self.events = events
        self.passes = passes
        self.variant = variant
    }

    public func run() throws -> Result {
        var configuration = try FunnelConfiguration.default()
        // Devices are evaluated one by one: the funnels counting groups, which need a group's members together, are the job's.
        configuration.funnels.removeAll { $0.aggregateBy == .group }
        for index in configuration.funnels.indices { variant.apply(to: &configuration.funnels[index]) }
        let paths = configuration.funnels.reduce(into: Set<String>()) { $0.formUnion($1.referencedPaths) }
        let now = Date()
        var persons: [(app: String, events: [FunnelEvent])] = []
        let produced = HistoryGenerator.devices(
            count: events, from: now.addingTimeInterval(-30 * 86_400), to: now, seed: 7, groupCalls: false
        ) { device in persons.append((device.app, Self.funnelEvents(of: device, paths: paths))) }
        let clock = Int64(now.timeIntervalSince1970 * 1_000_000)
        let byApp = Dictionary(grouping: configuration.funnels, by: \.app)
        let tallyShapes = Dictionary(uniqueKeysWithValues: configuration.funnels.map { ($0.name, FunnelTally.Shape($0)) })
        let factShapes = Dictionary(uniqueKeysWithValues: configuration.funnels.map { ($0.name, DropOffFacts.Shape($0)) })
        var bestEvaluate = Double.infinity, bestAll = Double.infinity
        for _ in 0..<max(1, passes) {
            var levels = 0
            var start = DispatchTime.now().uptimeNanoseconds
            for person in persons {
                for funnel in byApp[person.app] ?? [] {
                    levels += FunnelEvaluator.evaluate(distinctEvents: person.events, funnel: funnel, now: clock).level
                }
            }
            bestEvaluate = min(bestEvaluate, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            start = DispatchTime.now().uptimeNanoseconds
            var tallies: [String: [String: FunnelTally]] = [:]
            var counts: [String: DropOffCounts] = [:]
            for person in persons {
                for funnel in byApp[person.app] ?? [] {
                    let outcome = FunnelEvaluator.evaluate(distinctEvents: person.events, funnel: funnel, now: clock)
                    guard let begin = outcome.startTime, let tallyShape = tallyShapes[funnel.name], let factShape = factShapes[funnel.name] else { continue }
                    let day = CohortCalendar.day(of: begin, in: .gmt)
                    tallies[funnel.name, default: [:]][day, default: FunnelTally(funnel: funnel)].add(outcome, shape: tallyShape, cohortDay: day, timeZone: .gmt)
                    if let facts = DropOffFacts.of(outcome, in: funnel, shape: factShape, events: person.events) {
                        counts[funnel.name, default: DropOffCounts()].add(outcome, facts: facts, required: funnel.requiredStepIndices)
                    }
                }
            }
            bestAll = min(bestAll, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            precondition(levels > 0 && !tallies.isEmpty)
        }
        return Result(events: produced, persons: persons.count, passes: passes, evaluateSeconds: bestEvaluate, allSeconds: bestAll)
    }

    /// A simulated device's events as the engine reads them, with the `paths` the funnels refer to.
    static func funnelEvents(of device: SimulatedDevice, paths: Set<String>) -> [FunnelEvent] {
        var context: [String: String] = [:]
        flatten(.object(device.context), "context", paths, into: &context)
        return device.events.enumerated().map { n, e in
            var attributes = context
            flatten(.object(e.properties), "properties", paths, into: &attributes)
            return FunnelEvent(
                messageId: "\(device.anonymousId)-\(n)", kind: EventKind(rawValue: e.type) ?? .track, name: e.name,
                timestamp: e.timestamp, attributes: attributes)
        }
    }

    private static func flatten(_ value: JSONValue, _ path: String, _ wanted: Set<String>, into out: inout [String: String]) {
        switch value {
        case .object(let nested): for (key, inner) in nested { flatten(inner, path + "." + key, wanted, into: &out) }
        case .string(let text) where wanted.contains(path): out[path] = text
        case .number(let n) where wanted.contains(path): out[path] = n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        case .bool(let b) where wanted.contains(path): out[path] = b ? "true" : "false"
        default: break
        }
    }
}
