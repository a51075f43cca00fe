public import Foundation

/// The thresholds of a funnel's regression alerts (docs/funnels.md, "Regressions and alerts"), under
/// `alerts:` in the configuration.
public struct AlertSettings: Sendable, Hashable {
    /// Benjamini–Hochberg q below which a change counts, the q taken over
    /// every funnel of a report (`Regressions.acrossReport`): at most this
    /// share of nights with stable traffic raises a false alarm.
    public var alpha = 0.01
    /// Smallest change of a rate that counts, in proportion (0.02: 2 points).
    public var minEffect = 0.02
    /// Smallest relative change of the median time that counts (0.2: +20 %).
    public var minTimeEffect = 0.2
    /// Persons needed at the base of a metric on both sides, and starters
    /// for an app version to be compared.
    public var minPersons = 100
    /// Closed cohort days compared (period) …
    public var recentDays = 7
    /// … against the days before them.
    public var baselineDays = 28

    public init() {}
}

/// One metric compared between a baseline and a recent group of persons.
public struct MetricChange: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case period, version
    }

    public enum Metric: String, Sendable, Hashable {
        case conversionFromPrevious = "conversion_from_previous"
        case completionRate = "completion_rate"
        case medianSecondsToComplete = "median_seconds_to_complete"
    }

    /// One side of the comparison.
    public struct Side: Sendable, Hashable {
        /// `2026-10-20…2026-11-16` or `2.4.0`.
        public var label: String
        public var value: Double?
        /// Persons at the base of the metric: the previous step's for a
        /// conversion, starters for completion, completers for the time.
        public var persons: Int
        /// For rates, the 95 % Wilson interval.
        public var ci95: ConfidenceInterval?
    }

    public var funnel: String
    public var kind: Kind
    public var metric: Metric
    /// The step, for conversions.
    public var step: String?
    public var baseline: Side
    public var recent: Side
    /// recent − baseline (rates in proportion, times in seconds).
    public var difference: Double
    public var pValue: Double
    public var qValue = 1.0
    /// When the change is likely the app's tracking rather than its users:
    /// the instrumentation finding at its step (docs/tracking-health.md).
    public var likelyInstrumentation: String?

    /// Whether a higher value is worse (times) or better (rates).
    var higherIsWorse: Bool { metric == .medianSecondsToComplete }

    /// Worse than the baseline, whatever the size or significance.
    public var isWorse: Bool { higherIsWorse ? difference > 0 : difference < 0 }

    /// Large enough to count under `settings`, on enough persons on both sides.
    public func matters(_ settings: AlertSettings) -> Bool {
        guard baseline.persons >= settings.minPersons, recent.persons >= settings.minPersons else { return false }
        // A change of exactly the threshold counts, whatever the rounding of the subtraction.
        let slack = 1e-9
        if metric == .medianSecondsToComplete {
            guard let base = baseline.value, base > 0 else { return false }
            return abs(difference) / base >= settings.minTimeEffect - slack
        }
        return abs(difference) >= settings.minEffect - slack
    }
}

/// One side of a comparison: the persons of some cohort days, or the
/// starters of one app version.
public struct ComparisonSample: Sendable, Hashable {
    /// `2026-10-20…2026-11-16` or `2.4.0`.
    public var label: String
    /// Starters, completers, reach per configured step and completers' times.
    public var counts: FunnelTally.Version

    public init(label: String, counts: FunnelTally.Version) {
        self.label = label
        self.counts = counts
    }

    public init(label: String, started: Int, completed: Int, reached: [Int], durations: [Int64]) {
        self.init(label: label, counts: FunnelTally.Version(started: started, completed: completed, reached: reached, durations: durations))
    }

    /// The persons a tally (or a sum of day tallies) counted.
    public init(label: String, tally: FunnelTally) {
        self.init(label: label, counts: tally.everyone)
    }
}

/// What the regression check of one funnel found (docs/funnels.md, "Regressions and alerts").
public struct RegressionFindings: Sendable, Hashable {
    /// Worse, significant and large enough: the alerts. Most significant first.
    public var regressions: [MetricChange] = []
    /// Better likewise: reported, never alerted.
    public var improvements: [MetricChange] = []
    /// Every test made, with its q-value.
    public var tested: [MetricChange] = []

    public init() {}
}

/// Compares two groups of a funnel's persons metric by metric, as docs/funnels.md
/// says: conversions and completion by the pooled two-proportion z-test, the
/// median time to complete by Mann–Whitney U; q-values by Benjamini–Hochberg
/// over the tests given together.
public enum Regressions {
    /// The period and version comparisons of `funnel` over its cohort days'
    /// tallies (`days`: `YYYY-MM-DD` -> tally), on the days up to
    /// `newestClosedDay` (a day count) only: a day whose windows are not all
    /// closed is still filling and never raises an alarm.
    /// The same, for a report at `now` whose cohort days are cut in
    /// `timeZone` and end at `to` (nil: open-ended): the newest day it
    /// compares is closed at `now`, and not after `to`.
    public static func find(funnel: Funnel, days: [String: FunnelTally], now: Int64, timeZone: TimeZone, to: String?) -> RegressionFindings {
        let closed = CohortCalendar.newestClosedDay(now: now, windowMicroseconds: funnel.windowMicroseconds, in: timeZone)
        return find(funnel: funnel, days: days, newestClosedDay: min(closed, to.flatMap(CohortCalendar.dayNumber(ofText:)) ?? closed))
    }

    public static func find(funnel: Funnel, days: [String: FunnelTally], newestClosedDay: Int64) -> RegressionFindings {
        let settings = funnel.alerts
        var closed: [(day: Int64, tally: FunnelTally)] = []
        for (text, tally) in days {
            guard let day = CohortCalendar.dayNumber(ofText: text), day <= newestClosedDay else { continue }
            closed.append((day, tally))
        }
        var changes: [MetricChange] = []
        // Period: the last recent_days closed days against the baseline_days before them.
        let recentFirst = newestClosedDay - Int64(settings.recentDays) + 1
        let baselineFirst = recentFirst - Int64(settings.baselineDays)
        let none = FunnelTally.Version(reached: Array(repeating: 0, count: funnel.steps.count))
        var recent = none, baseline = none
        for (day, tally) in closed {
            if day >= recentFirst { recent.add(tally.everyone) } else if day >= baselineFirst { baseline.add(tally.everyone) }
        }
        func span(_ first: Int64, _ last: Int64) -> String {
            first == last ? CohortCalendar.text(ofDay: first) : CohortCalendar.text(ofDay: first) + "…" + CohortCalendar.text(ofDay: last)
        }
        changes += compare(
            funnel: funnel, kind: .period,
            baseline: ComparisonSample(label: span(baselineFirst, recentFirst - 1), counts: baseline),
            recent: ComparisonSample(label: span(recentFirst, newestClosedDay), counts: recent))
        // Version: the newest version with min_persons starters against the next older one with as many.
        var versions: [String: FunnelTally.Version] = [:]
        for (_, tally) in closed {
            for (value, version) in tally.versions {
                if versions[value] == nil { versions[value] = version } else { versions[value]?.add(version) }
            }
        }
        let ranked = versions.filter { $0.value.started >= settings.minPersons }.keys.sorted { versionPrecedes($1, $0) }
        if ranked.count >= 2, let newest = versions[ranked[0]], let older = versions[ranked[1]] {
            changes += compare(
                funnel: funnel, kind: .version, baseline: ComparisonSample(label: ranked[1], counts: older),
                recent: ComparisonSample(label: ranked[0], counts: newest))
        }
        var findings = RegressionFindings()
        findings.tested = adjust(changes)
        (findings.regressions, findings.improvements) = judge(findings.tested, settings: settings)
        return findings
    }

    /// Every metric of `funnel`, `baseline` against `recent`; q-values are
    /// left at 1 (see `adjust`). A metric with no persons at its base on a
    /// side is not tested.
    public static func compare(funnel: Funnel, kind: MetricChange.Kind, baseline: ComparisonSample, recent: ComparisonSample) -> [MetricChange] {
        var changes: [MetricChange] = []
        let required = funnel.requiredStepIndices
        let b = baseline.counts, r = recent.counts
        func rate(_ successes: Int, _ trials: Int, label: String) -> MetricChange.Side {
            let r = Rate(successes: successes, trials: trials)
            return MetricChange.Side(label: label, value: r.value, persons: trials, ci95: r.ci95)
        }
        func proportions(_ metric: MetricChange.Metric, step: String?, _ before: (Int, Int), _ after: (Int, Int)) {
            guard let test = Statistics.twoProportionZTest(successes1: after.0, trials1: after.1, successes2: before.0, trials2: before.1)
            else { return }
            let base = rate(before.0, before.1, label: baseline.label), now = rate(after.0, after.1, label: recent.label)
            changes.append(MetricChange(
                funnel: funnel.name, kind: kind, metric: metric, step: step, baseline: base, recent: now,
                difference: (now.value ?? 0) - (base.value ?? 0), pValue: test.pValue))
        }
        for (position, index) in required.enumerated() where position > 0 {
            let previous = required[position - 1]
            proportions(
                .conversionFromPrevious, step: funnel.rowName(index),
                (b.reached[index], b.reached[previous]), (r.reached[index], r.reached[previous]))
        }
        proportions(.completionRate, step: nil, (b.completed, b.started), (r.completed, r.started))
        let before = FunnelReport.sortedSeconds(b.durations), after = FunnelReport.sortedSeconds(r.durations)
        if let test = Statistics.mannWhitneyU(after, before),
           let median0 = Statistics.percentileCont(before, 0.5), let median1 = Statistics.percentileCont(after, 0.5) {
            changes.append(MetricChange(
                funnel: funnel.name, kind: kind, metric: .medianSecondsToComplete, step: nil,
                baseline: .init(label: baseline.label, value: median0, persons: before.count, ci95: nil),
                recent: .init(label: recent.label, value: median1, persons: after.count, ci95: nil), difference: median1 - median0,
                pValue: test.pValue))
        }
        return changes
    }

    /// Sets every change's q-value, Benjamini–Hochberg over all of them (a funnel's tests).
    public static func adjust(_ changes: [MetricChange]) -> [MetricChange] {
        var adjusted = changes
        for (index, q) in Statistics.benjaminiHochberg(changes.map(\.pValue)).enumerated() { adjusted[index].qValue = q }
        return adjusted
    }

    /// A night's findings across the funnels of one report, tested
    /// together: Benjamini–Hochberg over every funnel's tests at once, each
    /// funnel then judged by its own settings. Under stable traffic this
    /// bounds the share of *nights* with any false alarm by `alpha`, where
    /// adjusting each funnel alone bounded each funnel's share, and a night of
    /// five funnels alarmed up to five times as often.
    public static func acrossReport(_ findings: [RegressionFindings], settings: [AlertSettings]) -> [RegressionFindings] {
        let adjusted = adjust(findings.flatMap(\.tested))
        var start = 0
        return zip(findings, settings).map { funnel, settings in
            var together = RegressionFindings()
            together.tested = Array(adjusted[start..<start + funnel.tested.count])
            start += funnel.tested.count
            (together.regressions, together.improvements) = judge(together.tested, settings: settings)
            return together
        }
    }

    /// Regressions (worse, significant, large enough) and improvements
    /// (better, likewise), most significant first.
    public static func judge(_ changes: [MetricChange], settings: AlertSettings) -> (regressions: [MetricChange], improvements: [MetricChange]) {
        let counted = changes.filter { $0.qValue < settings.alpha && $0.matters(settings) }
            .sorted { ($0.qValue, $0.metric.rawValue, $0.step ?? "") < ($1.qValue, $1.metric.rawValue, $1.step ?? "") }
        return (counted.filter(\.isWorse), counted.filter { !$0.isWorse })
    }

    /// Semantic-version precedence of app versions (`2.10.0` after `2.9.1`,
    /// `2.4.0-beta` before `2.4.0`): `+build` metadata ignored, identifiers
    /// compared dot by dot (numbers by value and before text, text by its
    /// characters, a shorter list first when one is a prefix of the other), a
    /// release after its pre-releases; what is still equal (`1.01` and `1.1`,
    /// builds) by the plain text, so the order is total.
    public static func versionPrecedes(_ l: String, _ r: String) -> Bool {
        func parts(_ version: String) -> (core: [Substring], pre: [Substring]?) {
            let withoutBuild = version.split(separator: "+", maxSplits: 1, omittingEmptySubsequences: false)[0]
            let pieces = withoutBuild.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            let core = pieces[0].split(separator: ".", omittingEmptySubsequences: false)
            return (core, pieces.count > 1 ? pieces[1].split(separator: ".", omittingEmptySubsequences: false) : nil)
        }
        func identifier(_ a: Substring, _ b: Substring) -> Int {
            let aNumber = !a.isEmpty && a.allSatisfy { $0.isASCII && $0.isNumber }, bNumber = !b.isEmpty && b.allSatisfy { $0.isASCII && $0.isNumber }
            switch (aNumber, bNumber) {
            case (true, true):
                // By value, without overflow: fewer significant digits is smaller.
                let x = a.drop { $0 == "0" }, y = b.drop { $0 == "0" }
                if x.count != y.count { return x.count < y.count ? -1 : 1 }
                return x == y ? 0 : (x < y ? -1 : 1)
            case (true, false): return -1
            case (false, true): return 1
            case (false, false): return a == b ? 0 : (a < b ? -1 : 1)
            }
        }
        func list(_ a: [Substring], _ b: [Substring]) -> Int {
            for (x, y) in zip(a, b) {
                let order = identifier(x, y)
                if order != 0 { return order }
            }
            return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
        }
        let a = parts(l), b = parts(r)
        let core = list(a.core, b.core)
        if core != 0 { return core < 0 }
        switch (a.pre, b.pre) {
        case (nil, .some): return false
        case (.some, nil): return true
        case let (x?, y?):
            let order = list(x, y)
            if order != 0 { return order < 0 }
        case (nil, nil): break
        }
        return l < r
    }
}

/// Outcome of a Mann–Whitney U test.
public struct MannWhitneyResult: Sendable, Hashable {
    /// U of the first sample.
    public var u: Double
    public var z: Double
    /// Two-sided.
    public var pValue: Double
}

extension Statistics {
    /// Mann–Whitney U of `x` against `y`, two-sided, by the normal
    /// approximation with the tie correction and no continuity correction
    /// (docs/funnels.md, "Regressions and alerts"; SciPy's `mannwhitneyu(x, y, use_continuity=False,
    /// method="asymptotic")`). Nil when either sample is empty.
    public static func mannWhitneyU(_ x: [Double], _ y: [Double]) -> MannWhitneyResult? {
        guard !x.isEmpty, !y.isEmpty else { return nil }
        let n1 = Double(x.count), n2 = Double(y.count), n = n1 + n2
        // Both samples ascending, merged: linear for the sorted lists the report passes.
        let xs = x.ascending(), ys = y.ascending()
        var all: [(Double, Bool)] = []
        all.reserveCapacity(xs.count + ys.count)
        var i = 0, j = 0
        while i < xs.count || j < ys.count {
            if j == ys.count || (i < xs.count && xs[i] <= ys[j]) {
                all.append((xs[i], true))
                i += 1
            } else {
                all.append((ys[j], false))
                j += 1
            }
        }
        var rankSum = 0.0, ties = 0.0
        var start = 0
        while start < all.count {
            var end = start
            while end + 1 < all.count && all[end + 1].0 == all[start].0 { end += 1 }
            let rank = Double(start + end) / 2 + 1, t = Double(end - start + 1)
            ties += t * t * t - t
            for i in start...end where all[i].1 { rankSum += rank }
            start = end + 1
        }
        let u = rankSum - n1 * (n1 + 1) / 2
        let variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
        guard variance > 0 else { return MannWhitneyResult(u: u, z: 0, pValue: 1) }
        let z = (u - n1 * n2 / 2) / variance.squareRoot()
        return MannWhitneyResult(u: u, z: z, pValue: min(1, erfc(abs(z) / 2.0.squareRoot())))
    }
}
