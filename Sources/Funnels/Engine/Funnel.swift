/// A configured funnel: ordered steps, a conversion window, exclusions,
/// breakdown dimensions and targets.
public struct Funnel: Sendable, Hashable {
    /// The breakdowns used when a funnel names none (docs/funnels.md).
    public static let defaultBreakdowns = ["context.os.name", "context.app.version"]
    /// The dimension whose values the version comparison (docs/funnels.md, "Regressions and alerts") orders.
    public static let versionDimension = "context.app.version"
    /// The window used when a funnel names none (docs/funnels.md).
    public static let defaultWindowSeconds: Int64 = 86_400

    public var name: String
    public var app: String
    public var windowSeconds: Int64
    public var steps: [FunnelStep] {
        didSet {
            requiredStepIndices = Self.required(steps)
            requiredMatchers = Self.requiredMatchers(steps)
            isPlainWindowFunnel = isPlain
        }
    }
    public var breakdowns: [String]
    /// Matchers whose events, between a person's start and last reached step
    /// (or between two chosen steps), take the person out of the funnel.
    public var exclusions: [Exclusion]
    /// How the steps follow one another (docs/funnels.md, "Step order").
    public var order = Order.ordered {
        didSet { isPlainWindowFunnel = isPlain }
    }
    /// With `strict`: events that are never between two steps (heartbeats, lifecycle).
    public var ignore: [EventMatcher] = []
    /// Paths whose values every event of a chain shares (docs/funnels.md, "Hold a property constant").
    public var hold: [String] = [] {
        didSet { isPlainWindowFunnel = isPlain }
    }
    /// Which event of the chain gives the breakdown values.
    public var attribution = Attribution.firstStep
    /// Whom the funnel counts: persons, or the groups their `group` calls
    /// name (docs/funnels.md, "Counting groups").
    public var aggregateBy = Aggregation.person
    public var targets: [FunnelTarget]
    /// Persons a drop-off driver candidate needs to be tested (docs/funnels.md, "Why they drop off").
    public var minSupport: Int
    /// Thresholds of the regression alerts (docs/funnels.md, "Regressions and alerts").
    public var alerts = AlertSettings()
    /// Which days after the start retention looks at, and what counts as activity (docs/funnels.md, "Retention").
    public var retention = RetentionSettings()
    /// The default `diagnostics.min_support`.
    public static let defaultMinSupport = 20

    public init(
        name: String,
        app: String,
        windowSeconds: Int64 = Funnel.defaultWindowSeconds,
        steps: [FunnelStep],
        breakdowns: [String] = Funnel.defaultBreakdowns,
        exclusions: [Exclusion] = [],
        targets: [FunnelTarget] = [],
        minSupport: Int = Funnel.defaultMinSupport
    ) {
        self.name = name
        self.app = app
        self.windowSeconds = windowSeconds
        self.steps = steps
        self.requiredStepIndices = Self.required(steps)
        self.requiredMatchers = Self.requiredMatchers(steps)
        self.breakdowns = breakdowns
        self.exclusions = exclusions
        self.targets = targets
        self.minSupport = minSupport
        isPlainWindowFunnel = isPlain
    }

    /// Positions (in `steps`) of the non-optional steps, which alone define
    /// reach, completion and time. Kept with the steps rather than worked out
    /// on each call: the evaluator asks for every person and funnel.
    public private(set) var requiredStepIndices: [Int]

    private static func required(_ steps: [FunnelStep]) -> [Int] {
        steps.indices.filter { !steps[$0].isOptional }
    }

    /// A matcher of a required step, with the step's position among them.
    struct RequiredMatcher: Sendable, Hashable {
        var position: Int
        var matcher: EventMatcher
    }

    /// The required steps' matchers by the event or screen name they match,
    /// in step order: the evaluator checks an event against the few steps
    /// that name it instead of against every step.
    private(set) var requiredMatchers: [String: [RequiredMatcher]]

    private static func requiredMatchers(_ steps: [FunnelStep]) -> [String: [RequiredMatcher]] {
        var byName: [String: [RequiredMatcher]] = [:]
        for (position, index) in required(steps).enumerated() {
            for matcher in steps[index].matchers {
                byName[matcher.name, default: []].append(RequiredMatcher(position: position, matcher: matcher))
            }
        }
        return byName
    }

    /// The window in the unit of `FunnelEvent.timestamp`; saturates instead of
    /// trapping on absurd values.
    public var windowMicroseconds: Int64 {
        let (value, overflow) = windowSeconds.multipliedReportingOverflow(by: 1_000_000)
        return overflow ? Int64.max : max(0, value)
    }

    /// Position in `steps` of the step with this display name.
    public func stepIndex(named name: String) -> Int? {
        steps.firstIndex { $0.name == name }
    }

    /// Every attribute path this funnel reads: `where` paths of steps,
    /// exclusions, ignored events and active events, held paths and
    /// breakdown dimensions (not the audiences': `AudienceBreakdown`).
    public var referencedPaths: Set<String> {
        var paths = Set(breakdowns.filter { AudienceBreakdown.audience(of: $0) == nil }).union(retention.referencedPaths).union(hold)
        for matcher in steps.flatMap(\.matchers) + exclusions.map(\.matcher) + ignore {
            paths.formUnion(matcher.conditions.keys)
        }
        return paths
    }

    /// Whether a person's level is plain `windowFunnel`'s (ordered, one
    /// window, nothing held): the evaluator's fast sweep. Any other option
    /// takes the general search (`ChainSearch`). Kept with the options, as
    /// the evaluator asks for every person and funnel.
    public private(set) var isPlainWindowFunnel = true

    private var isPlain: Bool {
        order == .ordered && hold.isEmpty && steps.allSatisfy { $0.within == nil }
    }

    /// How steps follow one another.
    public enum Order: String, Sendable, Hashable, CaseIterable {
        /// Each step at or after the previous one (ClickHouse's `windowFunnel`).
        case ordered
        /// Each step directly after the previous one: no other event of the
        /// person in between but those `ignore` matches.
        case strict
        /// Step 1 first, the others in any order; the level counts the steps done.
        case any
    }

    /// Which event gives a person's breakdown values.
    public enum Attribution: Sendable, Hashable {
        /// The first step-1 event (and for a value it lacks, the earliest later event within its window).
        case firstStep
        /// The event of the last step the person reached.
        case lastStep
        /// The event of this step (a position in `steps`), when reached.
        case step(Int)

        /// `first_step`, `last_step` or `step N` (steps numbered from 1).
        public var text: String {
            switch self {
            case .firstStep: "first_step"
            case .lastStep: "last_step"
            case .step(let index): "step \(index + 1)"
            }
        }
    }

    /// The name of the report's row for step `index` (a position in
    /// `steps`): the step's own, or with `order: any`, where the k-th row
    /// counts those who did at least k of the steps whichever they were,
    /// "k of n steps".
    public func rowName(_ index: Int) -> String {
        guard index >= 0, index < steps.count else { return "" }
        guard order == .any, let position = requiredStepIndices.firstIndex(of: index) else { return steps[index].name }
        return "\(position + 1) of \(requiredStepIndices.count) steps"
    }
}

extension Funnel {
    /// What a funnel counts.
    public enum Aggregation: String, Sendable, Hashable, CaseIterable {
        case person, group
    }
}

extension Funnel {
    /// The options beyond `windowFunnel`'s defaults, in words, for the
    /// reports to name under the funnel's title; empty for a plain funnel.
    public var optionWords: [String] {
        var words: [String] = []
        if aggregateBy == .group { words.append("counting groups (each group's members' events together)") }
        switch order {
        case .ordered: break
        case .strict:
            words.append("strict order" + (ignore.isEmpty ? "" : " (ignoring \(ignore.map(\.name).joined(separator: ", ")))"))
        case .any: words.append("steps in any order after the first")
        }
        for step in steps {
            if let within = step.within { words.append("\(step.name) within \(FunnelDefinition.duration(within)) of the previous step") }
        }
        if !hold.isEmpty { words.append("held constant: \(hold.joined(separator: ", "))") }
        switch attribution {
        case .firstStep: break
        case .lastStep: words.append("breakdowns from the last step reached")
        case .step(let index): words.append("breakdowns from step \(index + 1) (\(index < steps.count ? steps[index].name : "?"))")
        }
        for exclusion in exclusions {
            guard let between = exclusion.between else { continue }
            words.append("excluded: \(exclusion.matcher.name) between steps \(between.lowerBound + 1) and \(between.upperBound + 1)")
        }
        return words
    }
}

/// An `exclude:` matcher, over the whole chain or between two steps.
public struct Exclusion: Sendable, Hashable {
    public var matcher: EventMatcher
    /// Positions in `steps` (required steps, the first before the second)
    /// between whose times on the chain an event excludes; nil: from the
    /// chain's start to its last reached step.
    public var between: ClosedRange<Int>?

    public init(_ matcher: EventMatcher, between: ClosedRange<Int>? = nil) {
        self.matcher = matcher
        self.between = between
    }

    /// Shorthand for a whole-chain exclusion of a track event.
    public static func event(_ name: String, where conditions: [String: String] = [:]) -> Exclusion {
        Exclusion(.event(name, where: conditions))
    }

    /// Shorthand for a whole-chain exclusion of a screen.
    public static func screen(_ name: String, where conditions: [String: String] = [:]) -> Exclusion {
        Exclusion(.screen(name, where: conditions))
    }
}

/// A goal the report flags as met or missed (`--fail-on-missed-targets`).
public struct FunnelTarget: Sendable, Hashable {
    /// What is measured.
    public enum Metric: Sendable, Hashable {
        /// Completers / persons reaching step 1.
        case completionRate
        /// Median seconds from chain start to the last step, over completers.
        case medianSecondsToComplete
        /// 90th percentile of the same.
        case p90SecondsToComplete
        /// Persons reaching step `to` / persons reaching step `from` (display names).
        case conversion(from: String, to: String)
    }

    /// Which side of the threshold counts as met. Bounds are inclusive: a
    /// completion rate exactly at `threshold` 0.6 is met, as is a median
    /// exactly at `max` 600.
    public enum Bound: Sendable, Hashable {
        /// `threshold:` — met when value >= limit.
        case atLeast(Double)
        /// `max:` — met when value <= limit.
        case atMost(Double)

        public var limit: Double {
            switch self {
            case .atLeast(let value), .atMost(let value): value
            }
        }

        public func isMet(by value: Double) -> Bool {
            switch self {
            case .atLeast(let limit): value >= limit
            case .atMost(let limit): value <= limit
            }
        }
    }

    public var name: String
    public var metric: Metric
    public var bound: Bound

    public init(name: String, metric: Metric, bound: Bound) {
        self.name = name
        self.metric = metric
        self.bound = bound
    }
}

/// Per-app settings the configuration carries for ingestion and reports.
public struct AppConfiguration: Sendable, Hashable {
    /// What ingestion does with PII properties.
    public enum PIIMode: String, Sendable, Hashable {
        case remove, hash
    }

    public static let defaultPIIProperties = ["phone", "email", "date_of_birth", "password"]

    public var name: String
    public var piiProperties: [String]
    public var piiMode: PIIMode
    /// The app's report time zone when set explicitly; `nil` means "use the
    /// global `report_time_zone`, else UTC" (see `FunnelConfiguration.timeZoneIdentifier(for:)`).
    public var timeZone: String?
    /// What the app promises to send, when it says (docs/tracking-health.md).
    public var trackingPlan: TrackingPlan?

    public init(
        name: String,
        piiProperties: [String] = AppConfiguration.defaultPIIProperties,
        piiMode: PIIMode = .remove,
        timeZone: String? = nil
    ) {
        self.name = name
        self.piiProperties = piiProperties
        self.piiMode = piiMode
        self.timeZone = timeZone
    }
}
