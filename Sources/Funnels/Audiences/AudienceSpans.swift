import Foundation

/// When one person (or group) is in an audience from a clock on, given
/// their outcomes and events as of that clock: the intervals in which the
/// condition holds if nothing new arrives.
///
/// Without new events a person's standing changes only with the clock: a
/// window closes (`PersonOutcome.openUntil`), a `stalled` wait passes, a
/// cohort day leaves the last `days`, an event leaves the last `within`.
/// Those instants are the only ones the condition can change at, so it is
/// evaluated at the clock and at each of them, and the intervals follow. The
/// job stores them (`audience_spans`): a later run finds who entered or left
/// since the last by comparing instants, without reading anyone again; a
/// new event recomputes its sender, as it does their funnels.
public struct AudienceSpans {
    /// `[enters, leaves)`; `leaves` nil: for as long as nothing new arrives.
    public struct Span: Sendable, Hashable {
        public var enters: Int64
        public var leaves: Int64?

        public init(enters: Int64, leaves: Int64?) {
            self.enters = enters
            self.leaves = leaves
        }

        public func contains(_ instant: Int64) -> Bool {
            enters <= instant && (leaves.map { instant < $0 } ?? true)
        }
    }

    /// A unit's outcomes by funnel name (those it started) and its events, as evaluated at `now`.
    public struct Unit {
        public var outcomes: [String: PersonOutcome]
        public var events: [FunnelEvent]

        public init(outcomes: [String: PersonOutcome], events: [FunnelEvent]) {
            self.outcomes = outcomes
            self.events = events
        }
    }

    /// The end of year 9999, as far as a stored timestamp goes: a change
    /// later than that (a window of a century after an event) never comes.
    static let lastInstant: Int64 = 253_402_300_800_000_000

    private var zones: [String: TimeZone] = [:]

    public init() {}

    /// The intervals from `now` on in which `unit` is in `audience`.
    public mutating func spans(of audience: Audience, unit: Unit, now: Int64) -> [Span] {
        var instants = Set<Int64>()
        changes(of: audience.condition, unit: unit, after: now, into: &instants)
        var spans: [Span] = []
        var open: Int64? = holds(audience.condition, unit: unit, at: now) ? now : nil
        for instant in instants.sorted() {
            let member = holds(audience.condition, unit: unit, at: instant)
            if member, open == nil {
                open = instant
            } else if !member, let start = open {
                spans.append(Span(enters: start, leaves: instant))
                open = nil
            }
        }
        if let start = open { spans.append(Span(enters: start, leaves: nil)) }
        return spans
    }

    /// Whether `unit`, as evaluated at some clock before `instant` with no
    /// event since, meets `condition` at `instant`.
    public mutating func holds(_ condition: AudienceCondition, unit: Unit, at instant: Int64) -> Bool {
        switch condition {
        case .funnel(let standing): return holds(standing, outcome: unit.outcomes[standing.funnel.name], at: instant)
        case .behaviour(let behaviour): return Self.count(behaviour, events: unit.events, at: instant) >= behaviour.times ? behaviour.did : !behaviour.did
        case .allOf(let operands):
            for operand in operands where !holds(operand, unit: unit, at: instant) { return false }
            return true
        case .anyOf(let operands):
            for operand in operands where holds(operand, unit: unit, at: instant) { return true }
            return false
        case .not(let operand): return !holds(operand, unit: unit, at: instant)
        }
    }

    private mutating func holds(_ standing: FunnelStanding, outcome: PersonOutcome?, at instant: Int64) -> Bool {
        guard var outcome, outcome.level > 0, !outcome.excluded else { return false }
        // Only the window's closing changes an outcome with the clock.
        outcome.inProgress = outcome.inProgress && (outcome.openUntil.map { instant < $0 } ?? false)
        if let days = standing.days, let start = outcome.startTime {
            let zone = timeZone(standing.timeZone)
            let age = CohortCalendar.dayNumber(of: instant, in: zone) - CohortCalendar.dayNumber(of: start, in: zone)
            guard age < Int64(days) else { return false }
        }
        let required = standing.funnel.requiredStepIndices
        switch standing.outcome {
        case .completed:
            return outcome.completed
        case .cell(let cell):
            return PersonCell(cell, step: standing.step ?? 1).contains(outcome, required: required)
        case .stalled(let seconds):
            let step = standing.step ?? 1
            guard PersonCell(.inProgress, step: step).contains(outcome, required: required),
                  let reached = outcome.stepTimes[step - 1] else { return false }
            return instant >= Self.adding(seconds: seconds, to: reached)
        }
    }

    /// The instants after `now` at which `condition` may change for `unit`.
    private mutating func changes(of condition: AudienceCondition, unit: Unit, after now: Int64, into instants: inout Set<Int64>) {
        func add(_ instant: Int64?) {
            if let instant, instant > now, instant < Self.lastInstant { instants.insert(instant) }
        }
        switch condition {
        case .funnel(let standing):
            guard let outcome = unit.outcomes[standing.funnel.name], outcome.level > 0 else { return }
            if outcome.inProgress { add(outcome.openUntil) }
            if case .stalled(let seconds) = standing.outcome, let step = standing.step,
               outcome.stepTimes.indices.contains(step - 1), let reached = outcome.stepTimes[step - 1] {
                add(Self.adding(seconds: seconds, to: reached))
            }
            if let days = standing.days, let start = outcome.startTime {
                add(dayStart(after: start, days: days, zone: timeZone(standing.timeZone)))
            }
        case .behaviour(let behaviour):
            for event in unit.events where behaviour.matchers.contains(where: { $0.matches(event) }) {
                add(event.timestamp)
                if let within = behaviour.withinSeconds { add(Self.adding(seconds: within, to: event.timestamp)) }
            }
        case .allOf(let operands), .anyOf(let operands):
            for operand in operands { changes(of: operand, unit: unit, after: now, into: &instants) }
        case .not(let operand):
            changes(of: operand, unit: unit, after: now, into: &instants)
        }
    }

    /// Matching events at or before `instant` and, when limited, after `instant - within`.
    static func count(_ behaviour: Behaviour, events: [FunnelEvent], at instant: Int64) -> Int {
        var count = 0
        for event in events where event.timestamp <= instant && behaviour.matchers.contains(where: { $0.matches(event) }) {
            if let within = behaviour.withinSeconds, adding(seconds: within, to: event.timestamp) <= instant { continue }
            count += 1
        }
        return count
    }

    /// The first instant of the local day `days` days after the one holding `start`.
    private func dayStart(after start: Int64, days: Int, zone: TimeZone) -> Int64 {
        let target = CohortCalendar.dayNumber(of: start, in: zone) + Int64(days) - 1
        var instant = Self.adding(seconds: Int64(days - 1) * 86_400, to: start)
        // Days of 23 or 25 hours move the wall clock by an hour: step back onto the day before the target's end.
        for _ in 0..<16 {
            let day = CohortCalendar.dayNumber(of: instant, in: zone)
            if day == target { break }
            instant = Self.adding(seconds: day < target ? 3 * 3600 : -3 * 3600, to: instant)
        }
        return CohortCalendar.endOfDay(containing: instant, in: zone)
    }

    private mutating func timeZone(_ identifier: String) -> TimeZone {
        if let zone = zones[identifier] { return zone }
        let zone = TimeZone(identifier: identifier) ?? TimeZone(identifier: "UTC") ?? .current
        zones[identifier] = zone
        return zone
    }

    /// `instant` plus `seconds`, saturating.
    static func adding(seconds: Int64, to instant: Int64) -> Int64 {
        let (micros, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000)
        if overflow { return seconds > 0 ? .max : .min }
        let (sum, overflowed) = instant.addingReportingOverflow(micros)
        return overflowed ? (micros > 0 ? .max : .min) : sum
    }
}
