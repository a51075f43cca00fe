import Foundation

/// A two-sided confidence interval for a proportion.
public struct ConfidenceInterval: Sendable, Hashable {
    public var lower: Double
    public var upper: Double

    public init(lower: Double, upper: Double) {
        self.lower = lower
        self.upper = upper
    }
}

/// Outcome of a two-proportion z-test.
public struct ZTestResult: Sendable, Hashable {
    public var z: Double
    /// Two-sided p-value.
    public var pValue: Double
}

/// The few statistics the reports need, written out so their exact
/// definitions (and agreement with PostgreSQL) are visible and testable.
public enum Statistics {
    /// z for a two-sided 95 % interval.
    public static let z95 = 1.959963984540054

    /// Wilson score interval: unlike the normal approximation it stays inside
    /// [0, 1] and behaves for small cohorts and rates near 0 or 1.
    /// `nil` when there are no trials.
    public static func wilson(successes: Int, trials: Int, z: Double = z95) -> ConfidenceInterval? {
        guard trials > 0, successes >= 0, successes <= trials else { return nil }
        let n = Double(trials)
        let p = Double(successes) / n
        let z2 = z * z
        let denominator = 1 + z2 / n
        let center = (p + z2 / (2 * n)) / denominator
        let half = z / denominator * (p * (1 - p) / n + z2 / (4 * n * n)).squareRoot()
        return ConfidenceInterval(lower: max(0, center - half), upper: min(1, center + half))
    }

    /// PostgreSQL `percentile_cont(p)`: linear interpolation between the two
    /// nearest ranks at position p·(n−1) of ascending `sorted`. `nil` when empty.
    public static func percentileCont(_ sorted: [Double], _ p: Double) -> Double? {
        guard !sorted.isEmpty, p.isFinite else { return nil }
        let position = min(max(p, 0), 1) * Double(sorted.count - 1)
        let lowerIndex = Int(position.rounded(.down))
        let upperIndex = min(lowerIndex + 1, sorted.count - 1)
        let fraction = position - Double(lowerIndex)
        let lower = sorted[lowerIndex]
        return fraction == 0 ? lower : lower + (sorted[upperIndex] - lower) * fraction
    }

    /// Standard normal cumulative distribution, via `erfc` for accuracy in the tails.
    public static func normalCDF(_ x: Double) -> Double {
        0.5 * erfc(-x / 2.0.squareRoot())
    }

    /// Pooled two-proportion z-test of p1 = p2, two-sided. `nil` when either
    /// group is empty. When the pooled rate is 0 or 1 the groups cannot
    /// differ: z = 0 and p = 1.
    public static func twoProportionZTest(
        successes1: Int, trials1: Int, successes2: Int, trials2: Int
    ) -> ZTestResult? {
        guard trials1 > 0, trials2 > 0,
              (0...trials1).contains(successes1), (0...trials2).contains(successes2) else { return nil }
        let n1 = Double(trials1), n2 = Double(trials2)
        let p1 = Double(successes1) / n1, p2 = Double(successes2) / n2
        let pooled = Double(successes1 + successes2) / (n1 + n2)
        let standardError = (pooled * (1 - pooled) * (1 / n1 + 1 / n2)).squareRoot()
        guard standardError > 0 else { return ZTestResult(z: 0, pValue: 1) }
        let z = (p1 - p2) / standardError
        return ZTestResult(z: z, pValue: min(1, erfc(abs(z) / 2.0.squareRoot())))
    }
}
