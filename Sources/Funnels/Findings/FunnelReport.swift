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
    /// The step's `within`: seconds it may come after the previous required step.
    public var withinSeconds: Int64?

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

/// A funnel's aggregated report (docs/funnels.md), computed from per-person
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
    /// Why persons dropped off (docs/funnels.md, "Why they drop off"), when the stored diagnostics were read.
    public var diagnostics: DropOffDiagnostics?
    /// The period and version comparisons (docs/funnels.md, "Regressions and alerts"); set by the caller, who
    /// has the tallies by cohort day.
    public var regressions = RegressionFindings()
    /// Signs of broken tracking, found beside the regressions (docs/tracking-health.md).
    public var instrumentation: [InstrumentationFinding] = []
    /// Retention of completers and non-completers (docs/funnels.md, "Retention"), when the stored retention was read.
    public var retention: RetentionReport?
    /// What analyses without a field of their own found, by the analysis's id (`AnalysisFinding`).
    public var analyses: [AnalysisID: AnalysisFinding] = [:]
    /// Cohort days the archive froze (docs/funnels.md, "Archived history"): nil when none is.
    public var frozen: FrozenDaysNote?
    /// Set when the run behind the report computed this funnel from the
    /// whole log because its definition was new or had changed.
    public var recomputed: Recomputation?
    /// `ordered`, `strict` or `any`.
    public var order: Funnel.Order
    /// The paths every event of a chain shares.
    public var hold: [String]
    /// `first_step`, `last_step` or `step N`.
    public var attribution: String
    /// The options beyond the defaults, in words (`Funnel.optionWords`).
    public var options: [String]
    /// What the counts count: persons, or groups (docs/funnels.md, "Counting groups").
    public var aggregateBy = Funnel.Aggregation.person

    /// Why a funnel's stored rows were computed anew, and from how many events.
    public struct Recomputation: Sendable, Hashable {
        /// "new funnel", "window 24h → 1h", … (`FunnelDefinition.changes`).
        public var reason: String
        public var events: Int

        public init(reason: String, events: Int) {
            self.reason = reason
            self.events = events
        }
    }

    /// Aggregates outcomes of `FunnelEvaluator.evaluate` for this funnel.
    /// Outcomes with level 0 (never reached step 1) are ignored; pass only
    /// persons whose cohort falls in the report range.
    public init(funnel: Funnel, outcomes: [PersonOutcome], now: Int64, timeZone: TimeZone) {
        self.init(funnel: funnel, tally: FunnelTally(funnel: funnel, outcomes: outcomes, timeZone: timeZone), now: now, timeZone: timeZone)
    }

    /// The report of the persons a tally (or a sum of tallies) counted.
    public init(funnel: Funnel, tally: FunnelTally, now: Int64, timeZone: TimeZone) {
        self.funnel = funnel.name
        self.app = funnel.app
        self.windowSeconds = funnel.windowSeconds
        self.now = now
        self.timeZone = timeZone.identifier
        order = funnel.order
        hold = funnel.hold
        attribution = funnel.attribution.text
        options = funnel.optionWords
        aggregateBy = funnel.aggregateBy
        started = tally.started
        completed = tally.completed
        inProgress = tally.inProgress
        excludedPersons = tally.excluded
        completionRate = Rate(successes: completed, trials: started)

        let durations = Statistics.percentilesCont(Self.seconds(tally.durations), [0.5, 0.9])
        timeToComplete = TimeToComplete(
            completers: tally.durations.count, medianSeconds: durations[0], p90Seconds: durations[1])
        steps = Self.stepRows(funnel: funnel, tally: tally)
        cohorts = tally.cohorts.map { day, cohort in
            CohortDay(
                day: day, started: cohort.started, completed: cohort.completed, inProgressPersons: cohort.inProgressPersons,
                inProgress: FunnelEvaluator.windowIsOpen(start: cohort.endOfDay, window: funnel.windowMicroseconds, now: now))
        }.sorted { $0.day < $1.day }
        breakdowns = funnel.breakdowns.map { BreakdownReport(dimension: $0, groups: tally.breakdowns[$0] ?? [:]) }
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

    private static func stepRows(funnel: Funnel, tally: FunnelTally) -> [StepReport] {
        let shape = FunnelTally.Shape(funnel)
        let reached = shape.required.map { tally.steps[$0].persons }
        return funnel.steps.indices.map { stepIndex in
            let step = funnel.steps[stepIndex]
            let counts = tally.steps[stepIndex]
            let median = Statistics.percentilesCont(seconds(counts.gaps), [0.5])[0]
            let next = shape.nextRequired[stepIndex]
            if step.isOptional {
                return StepReport(
                    index: stepIndex + 1, name: step.name, isOptional: true, persons: counts.persons,
                    dropOff: 0, inProgress: 0,
                    conversionFromPrevious: Rate(successes: counts.persons, trials: next < reached.count ? reached[next] : 0),
                    conversionFromStart: Rate(successes: counts.persons, trials: tally.started),
                    medianSecondsFromPrevious: median, withinSeconds: nil
                )
            }
            return StepReport(
                index: stepIndex + 1, name: funnel.rowName(stepIndex), isOptional: false, persons: reached[next],
                dropOff: counts.dropOff, inProgress: counts.inProgress,
                conversionFromPrevious: Rate(successes: reached[next], trials: next > 0 ? reached[next - 1] : reached[next]),
                conversionFromStart: Rate(successes: reached[next], trials: tally.started),
                medianSecondsFromPrevious: median, withinSeconds: step.within
            )
        }
    }

    /// Microseconds to seconds, ascending (what `percentileCont` takes). A
    /// list already in order (`FunnelTally.normalized`) is only converted.
    static func sortedSeconds(_ microseconds: [Int64]) -> [Double] {
        microseconds.ascending().map { Double($0) / 1_000_000 }
    }

    /// Microseconds to seconds, in the order given (what `percentilesCont` takes).
    static func seconds(_ microseconds: [Int64]) -> [Double] {
        microseconds.map { Double($0) / 1_000_000 }
    }
}

/// What a report says of the cohort days the archive froze: before which
/// day they are kept as computed, and whether the funnel's definition
/// changed since (those days were computed under the earlier one).
public struct FrozenDaysNote: Sendable, Hashable {
    public var before: String
    public var earlierDefinition: Bool

    public init(before: String, earlierDefinition: Bool) {
        self.before = before
        self.earlierDefinition = earlierDefinition
    }

    public var sentence: String {
        "cohort days before \(before) are frozen: their events are archived, and their rows are kept as computed"
            + (earlierDefinition ? ", under the funnel's earlier definition" : "")
    }
}
