/// Started / completed per value of one breakdown dimension.
public struct BreakdownValue: Sendable, Hashable {
    public var value: String
    public var started: Int
    public var completed: Int
    public var inProgress: Int
    /// The value's persons per configured step, as the report's rows count
    /// everyone (`persons`, `dropOff`, `inProgress`); empty when the stored
    /// days did not count them.
    public var steps: [FunnelTally.Step] = []
    public var completionRate: Rate { Rate(successes: completed, trials: started) }
}

/// All values of one breakdown dimension, largest group first.
public struct BreakdownReport: Sendable, Hashable {
    public var dimension: String
    public var values: [BreakdownValue]

    init(dimension: String, groups: [String: FunnelTally.Group]) {
        self.dimension = dimension
        self.values = groups.map { value, group in
            BreakdownValue(value: value, started: group.started, completed: group.completed, inProgress: group.inProgress, steps: group.steps)
        }.sorted { ($1.started, $0.value) < ($0.started, $1.value) }
    }

    public func value(_ value: String) -> BreakdownValue? {
        values.first { $0.value == value }
    }
}

/// Completion-rate difference between two values of one dimension, e.g.
/// `properties.flow_version` v2 vs v3, with a pooled two-proportion z-test.
public struct BreakdownComparison: Sendable, Hashable {
    public var dimension: String
    public var a: BreakdownValue
    public var b: BreakdownValue
    /// rate(a) − rate(b).
    public var difference: Double
    public var z: Double
    /// Two-sided p-value of "the two completion rates are equal".
    public var pValue: Double
}

extension FunnelReport {
    /// Compares completion rates of two values of a breakdown dimension;
    /// `nil` if the dimension or either value is absent.
    public func compare(breakdown dimension: String, a: String, b: String) -> BreakdownComparison? {
        guard let report = breakdown(dimension), let first = report.value(a), let second = report.value(b),
              let rateA = first.completionRate.value, let rateB = second.completionRate.value,
              let test = Statistics.twoProportionZTest(
                  successes1: first.completed, trials1: first.started,
                  successes2: second.completed, trials2: second.started
              ) else { return nil }
        return BreakdownComparison(
            dimension: dimension, a: first, b: second,
            difference: rateA - rateB, z: test.z, pValue: test.pValue
        )
    }
}
