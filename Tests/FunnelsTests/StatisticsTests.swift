import TestSupport
import Testing
@testable import Funnels

/// Reference values computed independently (Python, closed-form formulas;
/// they agree with statsmodels `proportion_confint(method="wilson")` and
/// PostgreSQL `percentile_cont`).
@Suite struct StatisticsTests {
    func close(_ a: Double?, _ b: Double, _ tolerance: Double = 1e-9) -> Bool {
        guard let a else { return false }
        return abs(a - b) <= tolerance
    }

    @Test func wilsonInterval() throws {
        let interval = try #require(Statistics.wilson(successes: 61, trials: 100))
        #expect(close(interval.lower, 0.5120301704584073))
        #expect(close(interval.upper, 0.6998312599360558))
        #expect(abs(interval.lower - 0.5120) < 1e-4 && abs(interval.upper - 0.6998) < 1e-4)

        let none = try #require(Statistics.wilson(successes: 0, trials: 10))
        #expect(none.lower == 0)
        #expect(close(none.upper, 0.2775327998628892))
        let all = try #require(Statistics.wilson(successes: 10, trials: 10))
        #expect(close(all.lower, 0.7224672001371107))
        #expect(all.upper == 1)
        // Exactly 0 and 1 at the ends, whatever the rounding of the formula (it gave 1.4e-17 for some counts).
        for trials in 1...500 {
            #expect(Statistics.wilson(successes: 0, trials: trials)?.lower == 0, "\(trials)")
            #expect(Statistics.wilson(successes: trials, trials: trials)?.upper == 1, "\(trials)")
        }
        #expect(Statistics.wilson(successes: 0, trials: 0) == nil)
    }

    @Test func percentileContMatchesPostgres() {
        // SELECT percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY v) FROM unnest('{1,2,3,4}'::float8[]) v
        #expect(Statistics.percentileCont([1, 2, 3, 4], 0.5) == 2.5)
        #expect(close(Statistics.percentileCont([1, 2, 3, 4], 0.9), 3.7))
        #expect(Statistics.percentileCont([7], 0.9) == 7)
        #expect(Statistics.percentileCont([10, 20, 30], 0.5) == 20)
        #expect(Statistics.percentileCont([10, 20, 30], 0) == 10)
        #expect(Statistics.percentileCont([10, 20, 30], 1) == 30)
        #expect(Statistics.percentileCont([], 0.5) == nil)
    }

    @Test("percentiles by selection equal percentile_cont over the sorted values: random values, many ties, sorted runs one after another")
    func percentilesBySelection() {
        var rng = SplitMix(seed: 17)
        let ps = [0, 0.1, 0.5, 0.9, 0.99, 1]
        for round in 0..<300 {
            let count = 1 + Int(rng.next() % 400)
            var values: [Double]
            switch round % 3 {
            case 0: values = (0..<count).map { _ in Double(rng.next() % 1_000_000) / 7 }
            case 1: values = (0..<count).map { _ in Double(rng.next() % 4) }
            default:
                values = []
                while values.count < count { values += (0..<(1 + Int(rng.next() % 30))).map { _ in Double(rng.next() % 500) }.sorted() }
            }
            let sorted = values.sorted()
            let expected = ps.map { Statistics.percentileCont(sorted, $0) }
            #expect(Statistics.percentilesCont(values, ps) == expected, "round \(round)")
        }
        #expect(Statistics.percentilesCont([], [0.5]) == [nil])
        #expect(Statistics.percentilesCont([3, 1, 2, 4], [0.5, 0.9]).map { $0 ?? .nan } == [2.5, 3.7].map { Statistics.percentileCont([1, 2, 3, 4], $0 == 2.5 ? 0.5 : 0.9) ?? .nan })
    }

    @Test func twoProportionZTest() throws {
        let result = try #require(Statistics.twoProportionZTest(successes1: 45, trials1: 100, successes2: 30, trials2: 100))
        #expect(close(result.z, 2.1908902300206647))
        #expect(close(result.pValue, 0.02845973691631057, 1e-12))
        let reversed = try #require(Statistics.twoProportionZTest(successes1: 30, trials1: 100, successes2: 45, trials2: 100))
        #expect(close(reversed.z, -2.1908902300206647))
        #expect(close(reversed.pValue, result.pValue, 1e-15))
        #expect(Statistics.twoProportionZTest(successes1: 0, trials1: 5, successes2: 0, trials2: 9) == ZTestResult(z: 0, pValue: 1))
        #expect(Statistics.twoProportionZTest(successes1: 1, trials1: 0, successes2: 0, trials2: 9) == nil)
    }

    @Test func normalCDF() {
        #expect(close(Statistics.normalCDF(0), 0.5))
        #expect(close(Statistics.normalCDF(1.959963984540054), 0.975, 1e-12))
        #expect(close(Statistics.normalCDF(-1), 0.15865525393145707, 1e-12))
    }
}
