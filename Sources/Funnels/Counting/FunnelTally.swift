public import Foundation

/// Everything a `FunnelReport` needs from a set of person outcomes, and no
/// more: counts, plus the exact durations its percentiles are taken over.
///
/// Tallies add. The report over any range of cohort days is the sum of those
/// days' tallies, so the nightly job keeps one per funnel and day and the
/// printed report never re-reads the persons; a rebuild fills them while it
/// evaluates, without reading its own output back. Durations are kept as whole
/// microseconds, the unit of the outcomes, so a merged report is exactly the
/// report of the merged outcomes.
public struct FunnelTally: Sendable, Hashable {
    /// One configured step (aligned with `Funnel.steps`).
    public struct Step: Sendable, Hashable {
        /// Required step: persons whose level reaches it. Optional step: persons who did it.
        public var persons = 0
        public var dropOff = 0
        public var inProgress = 0
        /// Microseconds from the previous required step along each person's chain.
        public var gaps: [Int64] = []

        public init(persons: Int = 0, dropOff: Int = 0, inProgress: Int = 0, gaps: [Int64] = []) {
            self.persons = persons
            self.dropOff = dropOff
            self.inProgress = inProgress
            self.gaps = gaps
        }
    }

    /// Persons who started on one cohort day.
    public struct Cohort: Sendable, Hashable {
        public var started = 0
        public var completed = 0
        public var inProgressPersons = 0
        /// When the local day ends (microseconds): the day's windows are open until this + window.
        public var endOfDay: Int64

        public init(started: Int = 0, completed: Int = 0, inProgressPersons: Int = 0, endOfDay: Int64) {
            self.started = started
            self.completed = completed
            self.inProgressPersons = inProgressPersons
            self.endOfDay = endOfDay
        }
    }

    /// Persons with one value of one breakdown dimension.
    public struct Group: Sendable, Hashable {
        public var started = 0
        public var completed = 0
        public var inProgress = 0
        /// Per configured step, as the tally's `steps` count them (no gaps):
        /// what a list of one value's persons is compared with. Empty in a
        /// tally stored before they were counted.
        public var steps: [Step] = []

        public init(started: Int = 0, completed: Int = 0, inProgress: Int = 0, steps: [Step] = []) {
            self.started = started
            self.completed = completed
            self.inProgress = inProgress
            self.steps = steps
        }

        /// Adds `other`'s persons (of the same funnel and value).
        mutating func add(_ other: Group) {
            started += other.started
            completed += other.completed
            inProgress += other.inProgress
            steps = steps.isEmpty ? other.steps : other.steps.isEmpty ? steps : zip(steps, other.steps).map { mine, theirs in
                Step(persons: mine.persons + theirs.persons, dropOff: mine.dropOff + theirs.dropOff, inProgress: mine.inProgress + theirs.inProgress)
            }
        }

        /// Takes out `other`'s persons, which this group holds.
        mutating func remove(_ other: Group) {
            started -= other.started
            completed -= other.completed
            inProgress -= other.inProgress
            if steps.count == other.steps.count {
                steps = zip(steps, other.steps).map { mine, theirs in
                    Step(persons: mine.persons - theirs.persons, dropOff: mine.dropOff - theirs.dropOff, inProgress: mine.inProgress - theirs.inProgress)
                }
            }
        }
    }

    /// Starters of one app version (`context.app.version`), with what the
    /// version comparison (docs/funnels.md) tests: reach per step and completers' times.
    public struct Version: Sendable, Hashable {
        public var started = 0
        public var completed = 0
        /// Per configured step (aligned with `Funnel.steps`): persons whose level
        /// reaches it; 0 for optional steps, which no comparison tests.
        public var reached: [Int]
        /// Completers' microseconds from chain start to completion.
        public var durations: [Int64] = []

        public init(started: Int = 0, completed: Int = 0, reached: [Int], durations: [Int64] = []) {
            self.started = started
            self.completed = completed
            self.reached = reached
            self.durations = durations
        }

        /// Adds the persons of `other`, counted for the same funnel.
        public mutating func add(_ other: Version) {
            started += other.started
            completed += other.completed
            reached = zip(reached, other.reached).map(+)
            durations += other.durations
        }
    }

    /// Every person of the tally, counted as a version's starters are: what
    /// the period comparison tests, without the gaps and groups it does not.
    public var everyone: Version {
        Version(started: started, completed: completed, reached: steps.map(\.persons), durations: durations)
    }

    /// Persons reaching step 1, not excluded.
    public var started = 0
    public var completed = 0
    /// Started, not completed, window still open.
    public var inProgress = 0
    public var excluded = 0
    /// Completers' microseconds from chain start to completion.
    public var durations: [Int64] = []
    public var steps: [Step]
    /// Cohort day (`YYYY-MM-DD`) -> its persons.
    public var cohorts: [String: Cohort] = [:]
    /// Breakdown dimension -> value -> its persons.
    public var breakdowns: [String: [String: Group]] = [:]
    /// App version -> its starters, when the funnel breaks down by
    /// `context.app.version` (`Funnel.versionDimension`).
    public var versions: [String: Version] = [:]

    /// An empty tally for `funnel`.
    public init(funnel: Funnel) {
        steps = Array(repeating: Step(), count: funnel.steps.count)
    }

    /// The tally of `outcomes`, as `FunnelReport` aggregates them.
    public init(funnel: Funnel, outcomes: [PersonOutcome], timeZone: TimeZone) {
        self.init(funnel: funnel)
        let shape = Shape(funnel)
        for outcome in outcomes {
            add(outcome, shape: shape, cohortDay: outcome.startTime.map { CohortCalendar.day(of: $0, in: timeZone) }, timeZone: timeZone)
        }
    }

    /// What `add` needs of the funnel, worked out once rather than per person.
    public struct Shape: Sendable {
        let required: [Int]
        /// Per configured step: the position among required steps of the next required step at or after it.
        let nextRequired: [Int]
        let dimensions: [String]
        /// Whether starters are counted per app version.
        let versions: Bool

        public init(_ funnel: Funnel) {
            let required = funnel.requiredStepIndices
            self.required = required
            dimensions = funnel.breakdowns
            versions = funnel.breakdowns.contains(Funnel.versionDimension)
            nextRequired = funnel.steps.indices.map { index in required.firstIndex { $0 >= index } ?? required.count }
        }
    }

    /// Adds one person's outcome. Outcomes with level 0 that are not excluded
    /// never reached step 1 and count nowhere. `cohortDay` is the local day of
    /// `outcome.startTime` in `timeZone` (the caller has it already; working it
    /// out here would repeat the calendar per person); when the day ends is
    /// worked out once per day.
    public mutating func add(_ outcome: PersonOutcome, shape: Shape, cohortDay: String?, timeZone: TimeZone) {
        if outcome.excluded {
            excluded += 1
            return
        }
        guard outcome.level > 0 else { return }
        started += 1
        if outcome.completed { completed += 1 } else if outcome.inProgress { inProgress += 1 }
        if let duration = outcome.microsecondsToComplete { durations.append(duration) }
        Self.count(outcome, shape: shape, into: &steps, gaps: true)
        if let cohortDay, let start = outcome.startTime {
            var cohort = cohorts[cohortDay] ?? Cohort(endOfDay: CohortCalendar.endOfDay(containing: start, in: timeZone))
            cohort.started += 1
            if outcome.completed { cohort.completed += 1 } else if outcome.inProgress { cohort.inProgressPersons += 1 }
            cohorts[cohortDay] = cohort
        }
        for dimension in shape.dimensions {
            let value = outcome.breakdown[dimension] ?? PersonOutcome.missingBreakdownValue
            var group = breakdowns[dimension, default: [:]][value] ?? Group(steps: Array(repeating: Step(), count: steps.count))
            group.started += 1
            if outcome.completed { group.completed += 1 } else if outcome.inProgress { group.inProgress += 1 }
            Self.count(outcome, shape: shape, into: &group.steps, gaps: false)
            breakdowns[dimension, default: [:]][value] = group
        }
        if shape.versions, let value = outcome.breakdown[Funnel.versionDimension], value != PersonOutcome.missingBreakdownValue {
            var version = versions[value] ?? Version(reached: Array(repeating: 0, count: steps.count))
            version.started += 1
            if outcome.completed { version.completed += 1 }
            if let duration = outcome.microsecondsToComplete { version.durations.append(duration) }
            for (position, stepIndex) in shape.required.enumerated() where outcome.level > position { version.reached[stepIndex] += 1 }
            versions[value] = version
        }
    }

    /// Counts a started person in the rows of `steps` (aligned with the
    /// funnel's steps): the steps they reached, where they stopped, and with
    /// `gaps` the time from the previous required step.
    private static func count(_ outcome: PersonOutcome, shape: Shape, into steps: inout [Step], gaps: Bool) {
        guard steps.count == shape.nextRequired.count else { return }
        for (position, stepIndex) in shape.required.enumerated() where outcome.level > position {
            steps[stepIndex].persons += 1
            if outcome.level == position + 1 && !outcome.completed {
                if outcome.inProgress { steps[stepIndex].inProgress += 1 } else { steps[stepIndex].dropOff += 1 }
            }
            if gaps, position > 0, let gap = span(outcome.stepTimes, from: shape.required[position - 1], to: stepIndex) {
                steps[stepIndex].gaps.append(gap)
            }
        }
        for stepIndex in outcome.optionalStepsDone where steps.indices.contains(stepIndex) {
            steps[stepIndex].persons += 1
            let next = shape.nextRequired[stepIndex]
            if gaps, next > 0, let gap = span(outcome.stepTimes, from: shape.required[next - 1], to: stepIndex) {
                steps[stepIndex].gaps.append(gap)
            }
        }
    }

    /// Adds every count and duration of `other` (a tally of the same funnel).
    public mutating func merge(_ other: FunnelTally) {
        started += other.started
        completed += other.completed
        inProgress += other.inProgress
        excluded += other.excluded
        durations += other.durations
        for index in steps.indices where other.steps.indices.contains(index) {
            steps[index].persons += other.steps[index].persons
            steps[index].dropOff += other.steps[index].dropOff
            steps[index].inProgress += other.steps[index].inProgress
            steps[index].gaps += other.steps[index].gaps
        }
        cohorts.merge(other.cohorts) { mine, theirs in
            Cohort(
                started: mine.started + theirs.started, completed: mine.completed + theirs.completed,
                inProgressPersons: mine.inProgressPersons + theirs.inProgressPersons, endOfDay: mine.endOfDay)
        }
        for (dimension, groups) in other.breakdowns {
            for (value, group) in groups {
                if breakdowns[dimension]?[value] == nil { breakdowns[dimension, default: [:]][value] = group } else { breakdowns[dimension]?[value]?.add(group) }
            }
        }
        // In place: merged by a closure, each version's lists were copied for every tally added.
        for (value, version) in other.versions {
            if versions[value] == nil { versions[value] = version } else { versions[value]?.add(version) }
        }
    }

    /// The tallies of `days` of `funnel` added up, each list's room made
    /// once (added one by one, the lists grew, and were copied, as they
    /// went). The lists are left in the days' order, not sorted: the report
    /// finds its percentiles by selection (`Statistics.percentilesCont`).
    public static func total(of days: some Collection<FunnelTally>, funnel: Funnel) -> FunnelTally {
        var total = FunnelTally(funnel: funnel)
        total.durations.reserveCapacity(days.reduce(0) { $0 + $1.durations.count })
        for index in total.steps.indices {
            total.steps[index].gaps.reserveCapacity(days.reduce(0) { $0 + ($1.steps.indices.contains(index) ? $1.steps[index].gaps.count : 0) })
        }
        for day in days { total.merge(day) }
        return total
    }

    /// Removes every count and duration of `other`, a tally of persons this
    /// one holds: an incremental run takes the replaced persons out of a
    /// day's stored tally instead of re-reading everyone else of that day.
    /// What no person is left in (a cohort day, a breakdown value) goes, so
    /// the result equals the tally of the remaining persons.
    public mutating func subtract(_ other: FunnelTally) {
        started -= other.started
        completed -= other.completed
        inProgress -= other.inProgress
        excluded -= other.excluded
        durations = Self.removing(other.durations, from: durations)
        for index in steps.indices where other.steps.indices.contains(index) {
            steps[index].persons -= other.steps[index].persons
            steps[index].dropOff -= other.steps[index].dropOff
            steps[index].inProgress -= other.steps[index].inProgress
            steps[index].gaps = Self.removing(other.steps[index].gaps, from: steps[index].gaps)
        }
        for (day, theirs) in other.cohorts {
            guard var mine = cohorts[day] else { continue }
            mine.started -= theirs.started
            mine.completed -= theirs.completed
            mine.inProgressPersons -= theirs.inProgressPersons
            cohorts[day] = mine.started == 0 ? nil : mine
        }
        for (dimension, groups) in other.breakdowns {
            for (value, theirs) in groups {
                guard var mine = breakdowns[dimension]?[value] else { continue }
                mine.remove(theirs)
                breakdowns[dimension]?[value] = mine.started == 0 ? nil : mine
            }
            if breakdowns[dimension]?.isEmpty == true { breakdowns[dimension] = nil }
        }
        for (value, theirs) in other.versions {
            guard var mine = versions[value] else { continue }
            mine.started -= theirs.started
            mine.completed -= theirs.completed
            mine.reached = zip(mine.reached, theirs.reached).map(-)
            mine.durations = Self.removing(theirs.durations, from: mine.durations)
            versions[value] = mine.started == 0 ? nil : mine
        }
    }

    /// `values` without one occurrence of each of `removed` (a sub-multiset of
    /// it), in ascending order.
    static func removing(_ removed: [Int64], from values: [Int64]) -> [Int64] {
        guard !removed.isEmpty else { return values }
        let values = values.ascending(), removed = removed.ascending()
        var kept: [Int64] = []
        kept.reserveCapacity(max(0, values.count - removed.count))
        var next = 0
        for value in values {
            if next < removed.count && removed[next] == value {
                next += 1
            } else {
                kept.append(value)
            }
        }
        return kept
    }

    /// The same tally with every list in ascending order: the form it is
    /// stored in, so equal sets of persons give equal bytes whatever order
    /// they were read in.
    public func normalized() -> FunnelTally {
        var copy = self
        copy.durations.sort()
        for index in copy.steps.indices { copy.steps[index].gaps.sort() }
        for value in Array(copy.versions.keys) { copy.versions[value]?.durations.sort() }
        return copy
    }

    public var isEmpty: Bool { started == 0 && excluded == 0 }

    private static func span(_ times: [Int64?], from start: Int, to end: Int) -> Int64? {
        guard times.indices.contains(start), times.indices.contains(end), let from = times[start], let to = times[end] else { return nil }
        let (value, overflow) = to.subtractingReportingOverflow(from)
        return overflow ? nil : value
    }
}
