/// Which events can change what the nightly job stores of a person in an
/// app's funnels, by kind and name alone: those a step, an exclusion or a
/// filtered active-event matcher names (their `where` filters are not looked
/// at, so this says "maybe"). Any other event is activity: it cannot start,
/// advance or exclude anyone, and counts for retention (docs/funnels.md, "Retention") through a
/// compact per-person record, so a person's everyday use of the app does not
/// make every nightly run recompute their funnels from their whole history.
public struct OutcomeEvents: Sendable {
    private var trackNames = Set<String>()
    private var screenNames = Set<String>()
    /// Whether a funnel counts groups: then a `group` call that makes its
    /// sender a new member changes that group (docs/funnels.md, "Counting
    /// groups"); the job tells a new membership from a repeated call.
    public private(set) var countsGroups = false

    /// `audiences`: those of the same app, whose behaviour operands' events
    /// may change a membership as a step's may change an outcome.
    public init(funnels: [Funnel], audiences: [Audience] = []) {
        for matcher in audiences.flatMap(\.matchers) {
            switch matcher.kind {
            case .event: trackNames.insert(matcher.name)
            case .screen: screenNames.insert(matcher.name)
            }
        }
        for funnel in funnels {
            if funnel.aggregateBy == .group { countsGroups = true }
            // Active events with filters need the event's attributes, which only a recompute reads.
            let filtered = funnel.retention.activeEvents.filter { !$0.conditions.isEmpty }
            for matcher in funnel.steps.flatMap(\.matchers) + funnel.exclusions.map(\.matcher) + filtered {
                switch matcher.kind {
                case .event: trackNames.insert(matcher.name)
                case .screen: screenNames.insert(matcher.name)
                }
            }
        }
    }

    /// Whether an event of `kind` named `name` may change a stored outcome.
    public func mayChangeOutcome(kind: EventKind, name: String?) -> Bool {
        guard let name else { return false }
        switch kind {
        case .track: return trackNames.contains(name)
        case .screen: return screenNames.contains(name)
        case .identify, .page, .group, .alias: return false
        }
    }
}
