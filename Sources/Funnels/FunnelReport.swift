public import Foundation

/// One row of the per-step table.
public struct StepReport: Sendable, Hashable {
    /// 1-based position in the configured steps (optional steps included).
    public var index: Int
    public var name: String
    public var isOptional: Bool
    /// Required step: persons whose level reaches it. Optional step: persons
    /// who did it between the surrounding required steps.
    public var persons: Int
    /// Persons whose highest step is this one and whose window has closed
    /// (in-progress persons are not drop-offs). Always 0 for the last step
    /// and for optional steps.
    public var dropOff: Int
    /// Persons whose highest step is this one and whose window is still open.
    public var inProgress: Int
    /// Required step: persons here / persons at the previous required step
    /// (step 1: persons / persons). Optional step: persons who did it / persons
    /// reaching the next required step.
    public var conversionFromPrevious: Rate
    public var conversionFromStart: Rate
    /// Median over persons who reached both of (this step − previous required
    /// step), along each person's chain; `nil` for step 1 or without data.
    public var medianSecondsFromPrevious: Double?

    /// dropOff / persons.
    public var dropOffRate: Rate { Rate(successes: dropOff, trials: persons) }
}

/// Median and p90 of time to complete, over completers.
public struct TimeToComplete: Sendable, Hashable {
    public var completers: Int
    public var medianSeconds: Double?
    public var p90Seconds: Double?
}

/// Persons whose first step-1 event fell on one local day.
public struct CohortDay: Sendable, Hashable {
    /// `YYYY-MM-DD` in the report time zone.
    public var day: String
    public var started: Int
    public var completed: Int
    /// Started that day, not completed, window still open.
    public var inProgressPersons: Int
    /// Some window of this day may still be open: dayEnd + window > now.
    public var inProgress: Bool
    public var completionRate: Rate { Rate(successes: completed, trials: started) }
}

/// A funnel's aggregated report (SPEC §4, §5), computed from per-person
/// outcomes so that it can be rebuilt from the stored outcomes at any time.
public struct FunnelReport: Sendable, Hashable {
    public var funnel: String
    public var app: String
    public var windowSeconds: Int64
    /// The report time (microseconds) used for in-progress decisions.
    public var now: Int64
    public var timeZone: String
    /// Persons reaching step 1 (excluded persons not counted).
    public var started: Int
    public var completed: Int
    /// Started, not completed, window still open.
    public var inProgress: Int
    /// Persons left out because of an `exclude:` event.
    public var excludedPersons: Int
    public var steps: [StepReport]
    /// completed / started.
    public var completionRate: Rate
    public var timeToComplete: TimeToComplete
    /// Ascending by day.
    public var cohorts: [CohortDay]
    /// In the funnel's breakdown order.
    public var breakdowns: [BreakdownReport]
    /// In the funnel's target order.
    public var targets: [TargetResult]

    /// Aggregates outcomes of `FunnelEvaluator.evaluate` for this funnel.
    /// Outcomes with level 0 (never reached step 1) are ignored; pass only
    /// persons whose cohort falls in the report range.
    public init(funnel: Funnel, outcomes: [PersonOutcome], now: Int64, timeZone: TimeZone) {
        let included = outcomes.filter { !$0.excluded && $0.level > 0 }
        let required = funnel.requiredStepIndices

        self.funnel = funnel.name
        self.app = funnel.app
        self.windowSeconds = funnel.windowSeconds
        self.now = now
        self.timeZone = timeZone.identifier
        started = included.count
        completed = included.count(where: { $0.completed })
        inProgress = included.count(where: { $0.inProgress && !$0.completed })
        excludedPersons = outcomes.count(where: { $0.excluded })
        completionRate = Rate(successes: completed, trials: started)

        let durations = included.compactMap(\.secondsToComplete).sorted()
        timeToComplete = TimeToComplete(
            completers: durations.count,
            medianSeconds: Statistics.percentileCont(durations, 0.5),
            p90Seconds: Statistics.percentileCont(durations, 0.9)
        )
        steps = Self.stepRows(funnel: funnel, required: required, outcomes: included)
        cohorts = Self.cohortDays(outcomes: included, funnel: funnel, now: now, timeZone: timeZone)
        breakdowns = funnel.breakdowns.map { BreakdownReport(dimension: $0, outcomes: included) }
        targets = []
        targets = funnel.targets.map { TargetResult(target: $0, report: self) }
    }

    public func breakdown(_ dimension: String) -> BreakdownReport? {
        breakdowns.first { $0.dimension == dimension }
    }

    /// The row of the step with this display name.
    public func step(named name: String) -> StepReport? {
        steps.first { $0.name == name }
    }

    private static func stepRows(funnel: Funnel, required: [Int], outcomes: [PersonOutcome]) -> [StepReport] {
        let started = outcomes.count
        let reached = required.indices.map { position in outcomes.count(where: { $0.level > position }) }
        return funnel.steps.indices.map { stepIndex in
            let step = funnel.steps[stepIndex]
            // Position among required steps of the next required step at or after this one.
            let next = required.firstIndex { $0 >= stepIndex } ?? required.count
            if step.isOptional {
                let done = outcomes.filter { $0.optionalStepsDone.contains(stepIndex) }
                let base = next < reached.count ? reached[next] : 0
                let gaps: [Double] = next > 0 ? done.compactMap { seconds(from: $0.stepTimes[required[next - 1]], to: $0.stepTimes[stepIndex]) } : []
                return StepReport(
                    index: stepIndex + 1, name: step.name, isOptional: true, persons: done.count,
                    dropOff: 0, inProgress: 0,
                    conversionFromPrevious: Rate(successes: done.count, trials: base),
                    conversionFromStart: Rate(successes: done.count, trials: started),
                    medianSecondsFromPrevious: Statistics.percentileCont(gaps.sorted(), 0.5)
                )
            }
            let position = next
            let here = outcomes.filter { $0.level == position + 1 && !$0.completed }
            let gaps: [Double] = position > 0
                ? outcomes.compactMap { outcome in
                    guard outcome.level > position else { return nil }
                    return seconds(from: outcome.stepTimes[required[position - 1]], to: outcome.stepTimes[stepIndex])
                }
                : []
            return StepReport(
                index: stepIndex + 1, name: step.name, isOptional: false, persons: reached[position],
                dropOff: here.count(where: { !$0.inProgress }),
                inProgress: here.count(where: { $0.inProgress }),
                conversionFromPrevious: Rate(successes: reached[position], trials: position > 0 ? reached[position - 1] : reached[position]),
                conversionFromStart: Rate(successes: reached[position], trials: started),
                medianSecondsFromPrevious: Statistics.percentileCont(gaps.sorted(), 0.5)
            )
        }
    }

    private static func seconds(from start: Int64?, to end: Int64?) -> Double? {
        guard let start, let end else { return nil }
        let (span, overflow) = end.subtractingReportingOverflow(start)
        return overflow ? nil : Double(span) / 1_000_000
    }

    private static func cohortDays(outcomes: [PersonOutcome], funnel: Funnel, now: Int64, timeZone: TimeZone) -> [CohortDay] {
        var days: [String: CohortDay] = [:]
        for outcome in outcomes {
            guard let start = outcome.startTime else { continue }
            let key = CohortCalendar.day(of: start, in: timeZone)
            var day = days[key] ?? CohortDay(
                day: key, started: 0, completed: 0, inProgressPersons: 0,
                inProgress: FunnelEvaluator.windowIsOpen(
                    start: CohortCalendar.endOfDay(containing: start, in: timeZone),
                    window: funnel.windowMicroseconds, now: now
                )
            )
            day.started += 1
            if outcome.completed { day.completed += 1 } else if outcome.inProgress { day.inProgressPersons += 1 }
            days[key] = day
        }
        return days.values.sorted { $0.day < $1.day }
    }
}
