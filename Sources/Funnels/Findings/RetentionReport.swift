/// Retention of completers against non-completers on one day after the start
/// (docs/funnels.md, "Retention"), with the difference of the rates and its two-proportion p-value.
public struct RetentionDay: Sendable, Hashable {
    /// N, days after the start.
    public var day: Int
    public var completers: RetentionSide
    public var nonCompleters: RetentionSide

    public init(day: Int, completers: RetentionSide, nonCompleters: RetentionSide) {
        self.day = day
        self.completers = completers
        self.nonCompleters = nonCompleters
    }

    /// Completers' rate less non-completers'; nil until both sides have eligible persons.
    public var difference: Double? {
        guard let c = completers.rate.value, let n = nonCompleters.rate.value else { return nil }
        return c - n
    }

    /// The pooled two-proportion z-test of the two rates, two-sided.
    public var pValue: Double? {
        Statistics.twoProportionZTest(
            successes1: completers.retained, trials1: completers.eligible,
            successes2: nonCompleters.retained, trials2: nonCompleters.eligible)?.pValue
    }

    /// Nobody is eligible yet: shown as pending, not as 0 %.
    public var isPending: Bool { completers.eligible + nonCompleters.eligible == 0 }
}

/// A funnel's retention by outcome, over the report's range and per cohort day.
public struct RetentionReport: Sendable, Hashable {
    /// One cohort day's retention days.
    public struct Cohort: Sendable, Hashable {
        /// `YYYY-MM-DD` in the report time zone.
        public var day: String
        public var days: [RetentionDay]

        public init(day: String, days: [RetentionDay]) {
            self.day = day
            self.days = days
        }
    }

    /// In the order of the funnel's retention days.
    public var days: [RetentionDay]
    /// Ascending by cohort day.
    public var cohorts: [Cohort]

    public init(days: [RetentionDay], cohorts: [Cohort]) {
        self.days = days
        self.cohorts = cohorts
    }

    /// The report of `cells` by cohort day, for the retention days `days`.
    public init(days: [Int], cells: [String: [RetentionCell]]) {
        func retention(_ cells: [RetentionCell]) -> [RetentionDay] {
            days.map { day in
                var completers = RetentionSide(), nonCompleters = RetentionSide()
                for cell in cells where cell.day == day {
                    if cell.completed { completers.add(cell.counts) } else { nonCompleters.add(cell.counts) }
                }
                return RetentionDay(day: day, completers: completers, nonCompleters: nonCompleters)
            }
        }
        self.days = retention(cells.values.flatMap { $0 })
        cohorts = cells.keys.sorted().map { Cohort(day: $0, days: retention(cells[$0] ?? [])) }
    }
}
