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
        // At 0 or every success the bound is exactly 0 or 1, which rounding missed (1.4e-17).
        return ConfidenceInterval(
            lower: successes == 0 ? 0 : max(0, center - half), upper: successes == trials ? 1 : min(1, center + half))
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

    /// `percentileCont` of each of `ps` over `values` in any order: the ranks
    /// found by selection, which costs a pass or two over the values where a
    /// sort costs many (a report's lists are every completer's and every
    /// step's of its range). Equal to sorting, then `percentileCont`.
    public static func percentilesCont(_ values: consuming [Double], _ ps: [Double]) -> [Double?] {
        guard !values.isEmpty else { return ps.map { _ in nil } }
        var work = values
        return ps.map { p in
            guard p.isFinite else { return nil }
            let position = min(max(p, 0), 1) * Double(work.count - 1)
            let lowerIndex = Int(position.rounded(.down))
            let fraction = position - Double(lowerIndex)
            let lower = select(&work, rank: lowerIndex)
            // After selection everything past the rank is at least it: the next rank is their least.
            guard fraction != 0, lowerIndex + 1 < work.count, let upper = work[(lowerIndex + 1)...].min() else { return lower }
            return lower + (upper - lower) * fraction
        }
    }

    /// Puts the `rank`-th smallest value (from 0) at `rank`, the lesser before
    /// it and the greater after it, and returns it: Hoare's selection, the
    /// pivot the median of three, and a sort of what is left when the
    /// ranges stop shrinking (never on a report's lists).
    static func select(_ values: inout [Double], rank: Int) -> Double {
        var low = 0, high = values.count - 1, rounds = 0
        while low < high {
            rounds += 1
            if rounds > 64 {
                values[low...high].sort()
                break
            }
            let middle = low + (high - low) / 2
            let pivot = [values[low], values[middle], values[high]].sorted()[1]
            var i = low, j = high
            while i <= j {
                while values[i] < pivot { i += 1 }
                while values[j] > pivot { j -= 1 }
                if i <= j {
                    values.swapAt(i, j)
                    i += 1
                    j -= 1
                }
            }
            // low…j ≤ pivot ≤ i…high; between them, values equal to the pivot.
            if rank <= j {
                high = j
            } else if rank >= i {
                low = i
            } else {
                break
            }
        }
        return values[rank]
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

/// A 2×2 table of persons: having a candidate or not, against converting or
/// dropping off. `a` has it and converted, `b` has it and dropped, `c` has it
/// not and converted, `d` has it not and dropped.
public struct TwoByTwo: Sendable, Hashable {
    public var a: Int
    public var b: Int
    public var c: Int
    public var d: Int

    public init(a: Int, b: Int, c: Int, d: Int) {
        self.a = a
        self.b = b
        self.c = c
        self.d = d
    }

    /// The odds ratio of converting, having it against not, with 0.5 added to
    /// every cell when any is zero (Haldane–Anscombe), and its 95 % Woolf
    /// interval, exp(ln OR ± 1.96·√Σ1/cell).
    public var oddsRatio: (value: Double, ci95: ConfidenceInterval) {
        let correction = min(a, b, c, d) == 0 ? 0.5 : 0
        let (a, b, c, d) = (Double(a) + correction, Double(b) + correction, Double(c) + correction, Double(d) + correction)
        let log = Foundation.log(a * d / (b * c))
        let spread = Statistics.z95 * (1 / a + 1 / b + 1 / c + 1 / d).squareRoot()
        return (exp(log), ConfidenceInterval(lower: exp(log - spread), upper: exp(log + spread)))
    }

    /// Fisher's exact test, two-sided: the probability, given the margins, of
    /// a table no more likely than this one (as R's `fisher.test`, with the
    /// same relative tolerance of 1e-7 for ties).
    ///
    /// The hypergeometric terms are walked outwards from the mode by their
    /// ratio and normalised by their sum, so no factorial is ever formed and a
    /// table of a hundred thousand persons costs a few thousand steps: terms
    /// below 1e-300 of the mode's weigh nothing next to it.
    public var fisherExactP: Double {
        let rows = a + b, columns = a + c, n = a + b + c + d
        guard n > 0, a >= 0, b >= 0, c >= 0, d >= 0 else { return 1 }
        let low = max(0, rows + columns - n), high = min(rows, columns)
        guard high > low else { return 1 }
        // Ratio of the term at x + 1 to the term at x.
        func ratio(_ x: Int) -> Double {
            Double(columns - x) * Double(rows - x) / (Double(x + 1) * Double(n - columns - rows + x + 1))
        }
        let mode = min(high, max(low, Int((Double(rows + 1) * Double(columns + 1) / Double(n + 2)).rounded(.down))))
        // Terms from the mode outwards, each side in the order it is walked.
        var above: [Double] = [], below: [Double] = []
        var term = 1.0
        for x in stride(from: mode, to: high, by: 1) {
            term *= ratio(x)
            if term < 1e-300 { break }
            above.append(term)
        }
        term = 1
        for x in stride(from: mode, to: low, by: -1) {
            term /= ratio(x - 1)
            if term < 1e-300 { break }
            below.append(term)
        }
        let offset = a - mode
        let observed: Double? = offset == 0 ? 1 : (offset > 0 ? above[safe: offset - 1] : below[safe: -offset - 1])
        guard let observed else {
            // Further out than any term that counts: the table's own
            // probability, from log-gamma, bounds the p-value from below.
            func logChoose(_ n: Int, _ k: Int) -> Double {
                lgamma(Double(n + 1)) - lgamma(Double(k + 1)) - lgamma(Double(n - k + 1))
            }
            return exp(logChoose(columns, a) + logChoose(n - columns, rows - a) - logChoose(n, rows))
        }
        // Summed smallest first on each side, the same way whatever the table's orientation.
        let total = below.reversed().reduce(0, +) + 1 + above.reversed().reduce(0, +)
        let limit = observed * (1 + 1e-7)
        let tail = below.reversed().reduce(0.0) { $1 <= limit ? $0 + $1 : $0 } + (1 <= limit ? 1 : 0)
            + above.reversed().reduce(0.0) { $1 <= limit ? $0 + $1 : $0 }
        return min(1, tail / total)
    }
}

extension Array {
    /// The element at `index`, or nil past either end.
    fileprivate subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}

extension Statistics {
    /// Benjamini–Hochberg q-values of `pValues`, in the same order: for the
    /// i-th smallest of m, min over j ≥ i of m·p₍ⱼ₎/j, at most 1. Controls the
    /// false discovery rate over every candidate tested together.
    public static func benjaminiHochberg(_ pValues: [Double]) -> [Double] {
        let m = pValues.count
        let order = pValues.indices.sorted { (pValues[$0], $0) < (pValues[$1], $1) }
        var q = [Double](repeating: 1, count: m)
        var running = 1.0
        for rank in stride(from: m, through: 1, by: -1) {
            let index = order[rank - 1]
            running = min(running, pValues[index] * Double(m) / Double(rank))
            q[index] = min(1, running)
        }
        return q
    }
}

extension Array where Element: Comparable {
    /// The elements ascending, sorted only when they are not already: a
    /// stored day's lists arrive in order (`FunnelTally.normalized`).
    func ascending() -> [Element] {
        indices.dropFirst().allSatisfy { self[$0 - 1] <= self[$0] } ? self : sorted()
    }
}
