/// Where one person stands in one funnel: the unit the nightly job stores per
/// person and recomputes when late events touch that person.
public struct PersonOutcome: Sendable, Hashable {
    /// Value recorded for a breakdown dimension no event carried.
    public static let missingBreakdownValue = "(none)"

    /// Required steps reached in order within the window (0 when step 1 was
    /// never seen). Optional steps do not count.
    public var level: Int
    /// Reached the last required step.
    public var completed: Bool
    /// Not completed and some step-1 event's window is still open at `now`.
    public var inProgress: Bool
    /// An excluded event fell between the chain's start and last reached step.
    public var excluded: Bool
    /// The person's first step-1 event: defines the cohort day.
    public var startTime: Int64?
    /// Start (t1) of the chain that defines level and timings; for completers
    /// the latest start of a chain ending at the earliest completion.
    public var chainStartTime: Int64?
    /// When the last required step was first reachable (tk), for completers.
    public var completionTime: Int64?
    /// Aligned with `Funnel.steps`: for required steps the time along the
    /// chain (nil past `level`); for optional steps the time the person did
    /// it between the surrounding required steps, if they did.
    public var stepTimes: [Int64?]
    /// Positions in `Funnel.steps` of the optional steps done in between.
    public var optionalStepsDone: Set<Int>
    /// Breakdown dimension -> value (`(none)` when missing).
    public var breakdown: [String: String]
    /// While in progress, when the last open window closes (the latest step-1
    /// event plus the window); for a completer whose chain's window is still
    /// open, when it closes (`chainStartTime` plus the window). Only the
    /// clock changes an outcome without new events, and only then: the
    /// nightly job closes such windows without reading the person's events
    /// again. Nil once the window has closed.
    public var openUntil: Int64?

    /// Whether the person's window has closed at the run (docs/funnels.md,
    /// "Why they drop off"): only then do the drop-off diagnostics and
    /// retention count them. A completer is counted as completed at once,
    /// but counted here only with those who dropped in the same days:
    /// counted sooner, the latest days' fast converters would meet no
    /// drop-offs, and whatever they share (the newest app version) would
    /// look like a driver.
    public var windowClosed: Bool { !inProgress && openUntil == nil }

    public init(
        level: Int,
        completed: Bool,
        inProgress: Bool,
        excluded: Bool,
        startTime: Int64?,
        chainStartTime: Int64?,
        completionTime: Int64?,
        stepTimes: [Int64?],
        optionalStepsDone: Set<Int>,
        breakdown: [String: String],
        openUntil: Int64? = nil
    ) {
        self.level = level
        self.completed = completed
        self.inProgress = inProgress
        self.excluded = excluded
        self.startTime = startTime
        self.chainStartTime = chainStartTime
        self.completionTime = completionTime
        self.stepTimes = stepTimes
        self.optionalStepsDone = optionalStepsDone
        self.breakdown = breakdown
        self.openUntil = openUntil
    }

    /// tk − t1 in microseconds, for completers.
    public var microsecondsToComplete: Int64? {
        guard let completionTime, let chainStartTime else { return nil }
        let (value, overflow) = completionTime.subtractingReportingOverflow(chainStartTime)
        return overflow ? nil : value
    }

    /// tk − t1 in seconds, for completers.
    public var secondsToComplete: Double? {
        microsecondsToComplete.map { Double($0) / 1_000_000 }
    }
}
