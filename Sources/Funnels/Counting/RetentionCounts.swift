/// What retention adds up per funnel and cohort day (docs/funnels.md, "Retention"): the start
/// times of the persons it counts (window closed, not excluded, at step 1 or
/// beyond), completers and non-completers apart, and per retention day those
/// of the persons active on it.
///
/// Start times rather than counts, because eligibility moves with the clock
/// alone: who is eligible for day N at a run is whoever started more than
/// (N+1)·24 h before it. Kept this way the counts add, subtract and are
/// stored without the run's time, and `cells(days:now:)` reads them at any time.
public struct RetentionCounts: Sendable, Hashable, Codable {
    /// One outcome's persons.
    public struct Side: Sendable, Hashable, Codable {
        /// Start times (microseconds) of the persons counted, in no order.
        public var starts: [Int64] = []
        /// Retention day -> start times of the persons active on it.
        public var retained: [Int: [Int64]] = [:]

        public init(starts: [Int64] = [], retained: [Int: [Int64]] = [:]) {
            self.starts = starts
            self.retained = retained
        }

        var isEmpty: Bool { starts.isEmpty && retained.values.allSatisfy(\.isEmpty) }
    }

    public var completers = Side()
    public var nonCompleters = Side()

    public init() {}

    public init(completers: Side = Side(), nonCompleters: Side = Side()) {
        self.completers = completers
        self.nonCompleters = nonCompleters
    }

    public var isEmpty: Bool { completers.isEmpty && nonCompleters.isEmpty }

    /// Counts one person who started at `start`, active on `retainedDays`.
    public mutating func add(start: Int64, completed: Bool, retainedDays: [Int]) {
        update(completed) { side in
            side.starts.append(start)
            for day in retainedDays { side.retained[day, default: []].append(start) }
        }
    }

    /// Counts a person already counted as active on `days` too.
    public mutating func addRetained(start: Int64, completed: Bool, days: [Int]) {
        update(completed) { side in
            for day in days { side.retained[day, default: []].append(start) }
        }
    }

    private mutating func update(_ completed: Bool, _ body: (inout Side) -> Void) {
        if completed { body(&completers) } else { body(&nonCompleters) }
    }

    public mutating func merge(_ other: RetentionCounts) {
        Self.merge(&completers, other.completers)
        Self.merge(&nonCompleters, other.nonCompleters)
    }

    /// Takes out persons these counts hold (each start once per time it is given).
    public mutating func subtract(_ other: RetentionCounts) {
        Self.subtract(&completers, other.completers)
        Self.subtract(&nonCompleters, other.nonCompleters)
    }

    private static func merge(_ side: inout Side, _ other: Side) {
        side.starts += other.starts
        for (day, starts) in other.retained { side.retained[day, default: []] += starts }
    }

    private static func subtract(_ side: inout Side, _ other: Side) {
        side.starts = removing(other.starts, from: side.starts)
        for (day, starts) in other.retained {
            side.retained[day] = removing(starts, from: side.retained[day] ?? [])
        }
        side.retained = side.retained.filter { !$0.value.isEmpty }
    }

    /// `values` less one occurrence of each of `removed`.
    private static func removing(_ removed: [Int64], from values: [Int64]) -> [Int64] {
        guard !removed.isEmpty else { return values }
        var left: [Int64: Int] = [:]
        for value in removed { left[value, default: 0] += 1 }
        return values.filter { value in
            guard let count = left[value], count > 0 else { return true }
            left[value] = count - 1
            return false
        }
    }

    /// The counts as a run at `now` sees them, per retention day in `days`
    /// and outcome.
    public func cells(days: [Int], now: Int64) -> [RetentionCell] {
        days.flatMap { day in
            [(true, completers), (false, nonCompleters)].map { completed, side in
                var cell = RetentionCell(day: day, completed: completed)
                for start in side.starts {
                    let after = RetentionSettings.eligibleAfter(start: start, day: day)
                    if after < now {
                        cell.counts.eligible += 1
                    } else {
                        cell.counts.pending += 1
                        cell.nextEligibleAfter = min(cell.nextEligibleAfter ?? after, after)
                    }
                }
                cell.counts.retained = (side.retained[day] ?? []).count { RetentionSettings.eligibleAfter(start: $0, day: day) < now }
                return cell
            }
        }
    }
}

/// One outcome's retention on one day after the start, over some persons.
public struct RetentionSide: Sendable, Hashable {
    /// Persons whose day has passed.
    public var eligible = 0
    /// Eligible persons active on the day.
    public var retained = 0
    /// Persons counted whose day has not passed yet: shown as pending, never as not retained.
    public var pending = 0

    public init(eligible: Int = 0, retained: Int = 0, pending: Int = 0) {
        self.eligible = eligible
        self.retained = retained
        self.pending = pending
    }

    public var rate: Rate { Rate(successes: retained, trials: eligible) }

    public mutating func add(_ other: RetentionSide) {
        eligible += other.eligible
        retained += other.retained
        pending += other.pending
    }
}

/// One row of `funnel_retention`: a cohort day's counts for one retention day
/// and outcome, as a run saw them.
public struct RetentionCell: Sendable, Hashable {
    public var day: Int
    public var completed: Bool
    public var counts = RetentionSide()
    /// When the next pending person becomes eligible (a run after it sees
    /// other counts); nil when nobody is pending.
    public var nextEligibleAfter: Int64?

    public init(day: Int, completed: Bool, counts: RetentionSide = RetentionSide(), nextEligibleAfter: Int64? = nil) {
        self.day = day
        self.completed = completed
        self.counts = counts
        self.nextEligibleAfter = nextEligibleAfter
    }
}
