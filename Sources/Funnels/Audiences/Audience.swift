/// A standing set of persons (or groups) of one app, kept by the nightly job
/// and `onramp audiences run` (docs/audiences.md): everyone stuck at a step,
/// everyone who completed, everyone who did or did not do something lately,
/// and combinations of those. "Cohort" means a cohort day here, hence the name.
///
/// References to other audiences are resolved when the configuration is
/// read: `condition` holds the whole tree, so an audience is evaluated (and
/// fingerprinted) on its own.
public struct Audience: Sendable, Hashable {
    public var name: String
    public var app: String
    /// Whether it holds persons or groups (`aggregate_by: group`); every
    /// operand counts the same.
    public var aggregateBy: Funnel.Aggregation
    public var condition: AudienceCondition
    public var description: String?
    /// Where its changes are sent, if anywhere.
    public var delivery: AudienceDelivery?

    public init(
        name: String, app: String, aggregateBy: Funnel.Aggregation = .person, condition: AudienceCondition,
        description: String? = nil, delivery: AudienceDelivery? = nil
    ) {
        self.name = name
        self.app = app
        self.aggregateBy = aggregateBy
        self.condition = condition
        self.description = description
        self.delivery = delivery
    }

    /// The funnels its condition reads, by name.
    public var funnels: Set<String> { condition.funnels }

    /// The event matchers its behaviour operands look for: an event they
    /// name may change a member's state, so the job recomputes its sender.
    public var matchers: [EventMatcher] { condition.matchers }

    /// The attribute paths its matchers' `where` filters read.
    public var referencedPaths: Set<String> { Set(matchers.flatMap(\.conditions.keys)) }
}

/// What makes a person a member, at a clock.
public indirect enum AudienceCondition: Sendable, Hashable {
    /// Where the person stands in a funnel (the report's cells, docs/funnels.md).
    case funnel(FunnelStanding)
    /// Did (or did not) do something at least so many times, lately or ever.
    case behaviour(Behaviour)
    case allOf([AudienceCondition])
    case anyOf([AudienceCondition])
    case not(AudienceCondition)

    var funnels: Set<String> {
        switch self {
        case .funnel(let standing): [standing.funnel.name]
        case .behaviour: []
        case .allOf(let operands), .anyOf(let operands): operands.reduce(into: Set()) { $0.formUnion($1.funnels) }
        case .not(let operand): operand.funnels
        }
    }

    var matchers: [EventMatcher] {
        switch self {
        case .funnel: []
        case .behaviour(let behaviour): behaviour.matchers
        case .allOf(let operands), .anyOf(let operands): operands.flatMap(\.matchers)
        case .not(let operand): operand.matchers
        }
    }
}

/// A funnel operand: an outcome at a step (`PersonCell`'s), `completed`, or
/// `stalled` — reached the step, not the next required one, for at least
/// `stalledFor` since their step event, window still open.
public struct FunnelStanding: Sendable, Hashable {
    public enum Outcome: Sendable, Hashable {
        case cell(PersonCell.Outcome)
        case completed
        /// Seconds since the step's event.
        case stalled(seconds: Int64)
    }

    public var funnel: Funnel
    public var outcome: Outcome
    /// The report's row, from 1 (nil for `completed`).
    public var step: Int?
    /// Only persons whose cohort day is one of the last `days` at the clock (nil: every day).
    public var days: Int?
    /// The zone the funnel's cohort days are cut in (`FunnelConfiguration.timeZoneIdentifier(for:)`).
    public var timeZone: String

    public init(funnel: Funnel, outcome: Outcome, step: Int?, days: Int? = nil, timeZone: String = "UTC") {
        self.funnel = funnel
        self.outcome = outcome
        self.step = step
        self.days = days
        self.timeZone = timeZone
    }
}

/// A behaviour operand: events matching any of `matchers`, counted over the
/// last `withinSeconds` (nil: every event the log holds), at least `times`
/// (`did`), or fewer (`did_not`).
public struct Behaviour: Sendable, Hashable {
    public var did: Bool
    public var matchers: [EventMatcher]
    public var times: Int
    public var withinSeconds: Int64?

    public init(did: Bool, matchers: [EventMatcher], times: Int = 1, withinSeconds: Int64? = nil) {
        self.did = did
        self.matchers = matchers
        self.times = times
        self.withinSeconds = withinSeconds
    }
}

/// Where an audience's changes go (docs/audiences.md, "Delivering"): an
/// http(s) URL, the changes it wants, the traits sent with each member.
public struct AudienceDelivery: Sendable, Hashable {
    public enum Change: String, Sendable, Hashable, CaseIterable {
        case enter, leave
    }

    public var url: String
    public var on: Set<Change>
    public var traits: [String]
    /// Whether a new audience (or a new delivery) first sends its current members as `enter`.
    public var backfill: Bool
    /// A file holding the signing secret; nil: `$ONRAMP_DELIVERY_SECRET`.
    public var secretFile: String?
    /// Attempts before a change is dead-lettered.
    public var maxAttempts: Int

    public init(
        url: String, on: Set<Change> = [.enter, .leave], traits: [String] = [], backfill: Bool = true, secretFile: String? = nil,
        maxAttempts: Int = 10
    ) {
        self.url = url
        self.on = on
        self.traits = traits
        self.backfill = backfill
        self.secretFile = secretFile
        self.maxAttempts = maxAttempts
    }
}
