import Foundation
@testable import Funnels
import Testing

/// Regression detection's statistics against U counted pair by pair (Python,
/// exact), and the judgement on tallies with a planted change.
@Suite struct RegressionsTests {
    @Test("Mann–Whitney U, z and p equal U counted pair by pair with the tie-corrected variance", arguments: [
        ([1.0, 2, 3, 4, 5], [3.0, 4, 5, 6, 7, 8], 4.5, -1.9302348177392572, 0.05357774928971017),
        ([10.0, 10, 20, 30, 30, 30, 45], [5.0, 10, 10, 15, 20], 28.5, 1.8351686473329714, 0.06648070506859377),
        ([0.8, 1.2, 1.9, 2.2, 3.5, 3.5, 4.1, 5.0], [2.0, 2.5, 3.5, 4.4, 6.1, 7.0, 7.2, 9.9, 12.0], 13.0, -2.2186205076037036, 0.026512553168829448),
    ])
    func mannWhitney(x: [Double], y: [Double], u: Double, z: Double, p: Double) throws {
        let result = try #require(Statistics.mannWhitneyU(x, y))
        #expect(abs(result.u - u) < 1e-12)
        #expect(abs(result.z - z) < 1e-12)
        #expect(abs(result.pValue - p) < 1e-12)
        #expect(Statistics.mannWhitneyU([], y) == nil)
        #expect(Statistics.mannWhitneyU([1, 1], [1, 1])?.pValue == 1)
    }

    static let funnel = linearFunnel(["start", "phone", "otp", "done"])

    /// `started` persons, converting at each step with `rates`; completers take `seconds`.
    static func tally(started: Int, rates: [Double], seconds: Double) -> FunnelTally {
        var tally = FunnelTally(funnel: funnel)
        var persons = started
        tally.started = started
        tally.steps[0].persons = started
        for (index, rate) in rates.enumerated() {
            persons = Int((Double(persons) * rate).rounded())
            tally.steps[index + 1].persons = persons
        }
        tally.completed = persons
        tally.durations = (0..<persons).map { Int64((seconds + Double($0 % 50)) * 1_000_000) }
        return tally
    }

    @Test("a planted 8-point drop at one step is the one regression, with its step and direction; a gain is an improvement")
    func plantedChange() {
        let baseline = Self.tally(started: 4000, rates: [0.9, 0.95, 0.9], seconds: 300)
        let recent = Self.tally(started: 1000, rates: [0.9, 0.87, 0.95], seconds: 300)
        let changes = Regressions.adjust(Regressions.compare(
            funnel: Self.funnel, kind: .version, baseline: ComparisonSample(label: "2.3.0", tally: baseline), recent: ComparisonSample(label: "2.4.0", tally: recent)))
        #expect(changes.count == 3 + 1 + 1)
        let (regressions, improvements) = Regressions.judge(changes, settings: AlertSettings())
        #expect(regressions.map { [$0.metric.rawValue, $0.step ?? ""] } == [["conversion_from_previous", "otp"]])
        #expect(regressions.first.map { abs($0.difference + 0.08) < 0.005 } == true)
        #expect(regressions.first?.baseline.label == "2.3.0" && regressions.first?.recent.label == "2.4.0")
        #expect(improvements.map { $0.step ?? $0.metric.rawValue } == ["done"])
        // The same data with a 10-point threshold: nothing counts.
        var strict = AlertSettings()
        strict.minEffect = 0.1
        #expect(Regressions.judge(changes, settings: strict).regressions.isEmpty)
        // Too few persons on one side: nothing counts.
        var large = AlertSettings()
        large.minPersons = 5000
        #expect(Regressions.judge(changes, settings: large).regressions.isEmpty)
    }

    @Test("across a report: q-values are m·p/rank over every funnel's tests together, min over larger ranks, each funnel judged by its own alpha")
    func acrossReport() {
        let baseline = Self.tally(started: 4000, rates: [0.9, 0.95, 0.9], seconds: 300)
        let recent = Self.tally(started: 1000, rates: [0.9, 0.87, 0.95], seconds: 300)
        var one = RegressionFindings(), two = RegressionFindings()
        one.tested = Regressions.compare(
            funnel: Self.funnel, kind: .version, baseline: ComparisonSample(label: "2.3.0", tally: baseline),
            recent: ComparisonSample(label: "2.4.0", tally: recent))
        two.tested = Regressions.compare(
            funnel: Self.funnel, kind: .period, baseline: ComparisonSample(label: "before", tally: baseline),
            recent: ComparisonSample(label: "after", tally: baseline))
        var lenient = AlertSettings(), strict = AlertSettings()
        lenient.alpha = 0.05
        strict.alpha = 1e-12
        let together = Regressions.acrossReport([one, two], settings: [lenient, strict])
        // By hand: the step-up rule over the ten p-values in one list.
        let p = (one.tested + two.tested).map(\.pValue)
        let order = p.indices.sorted { p[$0] < p[$1] }
        var q = Array(repeating: 1.0, count: p.count), running = 1.0
        for (rank, index) in order.enumerated().reversed() {
            running = min(running, p[index] * Double(p.count) / Double(rank + 1))
            q[index] = min(1, running)
        }
        let got = together.flatMap(\.tested).map(\.qValue)
        #expect(zip(got, q).allSatisfy { abs($0 - $1) < 1e-12 }, "\(got) vs \(q)")
        #expect(together[0].regressions.map { $0.step ?? "" } == ["otp"])
        #expect(together[1].regressions.isEmpty && together[1].tested.count == two.tested.count)
        // A funnel alone is its own report: the same q-values as adjusting it alone.
        #expect(Regressions.acrossReport([one], settings: [lenient])[0].tested == Regressions.adjust(one.tested))
    }

    @Test("a slower median by more than 20 % is a regression of the time; identical groups raise nothing")
    func slowerAndSame() {
        let baseline = Self.tally(started: 2000, rates: [0.9, 0.9, 0.9], seconds: 300)
        let slower = Self.tally(started: 2000, rates: [0.9, 0.9, 0.9], seconds: 420)
        let (regressions, _) = Regressions.judge(
            Regressions.adjust(Regressions.compare(funnel: Self.funnel, kind: .period, baseline: ComparisonSample(label: "before", tally: baseline), recent: ComparisonSample(label: "after", tally: slower))),
            settings: AlertSettings())
        #expect(regressions.map(\.metric) == [.medianSecondsToComplete])
        let same = Regressions.adjust(Regressions.compare(funnel: Self.funnel, kind: .period, baseline: ComparisonSample(label: "a", tally: baseline), recent: ComparisonSample(label: "b", tally: baseline)))
        #expect(Regressions.judge(same, settings: AlertSettings()) == ([], []))
    }

    /// A day's tally whose persons are all on `version`.
    static func day(started: Int, rates: [Double], version: String) -> FunnelTally {
        var tally = tally(started: started, rates: rates, seconds: 300)
        tally.versions[version] = FunnelTally.Version(
            started: tally.started, completed: tally.completed, reached: tally.steps.map(\.persons), durations: tally.durations)
        return tally
    }

    @Test("find: the last recent_days closed days against the baseline_days before them, the newest version with min_persons against the next; open days never count")
    func findOverDays() throws {
        let newest = try #require(CohortCalendar.dayNumber(ofText: "2026-11-20"))
        var days: [String: FunnelTally] = [:]
        for offset in 0..<40 {
            let day = newest - Int64(offset)
            days[CohortCalendar.text(ofDay: day)] = offset < 7
                ? Self.day(started: 300, rates: [0.9, 0.85, 0.9], version: "2.4.0")
                : Self.day(started: 300, rates: [0.9, 0.95, 0.9], version: "2.3.0")
        }
        // Too few starters to be compared, though newest.
        days["2026-11-20"]?.versions["2.5.0"] = FunnelTally.Version(started: 40, completed: 10, reached: [40, 30, 20, 10])
        let found = Regressions.find(funnel: Self.funnel, days: days, newestClosedDay: newest)
        #expect(found.regressions.map { "\($0.kind.rawValue) \($0.step ?? $0.metric.rawValue)" }.sorted()
                == ["period completion_rate", "period otp", "version completion_rate", "version otp"])
        let period = try #require(found.regressions.first { $0.kind == .period && $0.step == "otp" })
        #expect(period.baseline.label == "2026-10-17…2026-11-13" && period.recent.label == "2026-11-14…2026-11-20")
        #expect(period.baseline.persons == 28 * 270 && period.recent.persons == 7 * 270)
        let version = try #require(found.regressions.first { $0.kind == .version && $0.step == "otp" })
        #expect(version.baseline.label == "2.3.0" && version.recent.label == "2.4.0")
        #expect(found.tested.count == 2 * (3 + 1 + 1))
        // A day still in progress, however bad, changes nothing.
        var later = days
        later["2026-11-21"] = Self.day(started: 3000, rates: [0.3, 0.3, 0.3], version: "2.6.0")
        #expect(Regressions.find(funnel: Self.funnel, days: later, newestClosedDay: newest) == found)
        // On the days before the bad week, nothing is found.
        let quiet = Regressions.find(funnel: Self.funnel, days: days, newestClosedDay: newest - 7)
        #expect(quiet.regressions.isEmpty && quiet.improvements.isEmpty)
        // The newest closed day of a 24 h window: the day before the one 24 h ago.
        let now = (newest + 2) * 86_400_000_000 + 10 * 3_600_000_000  // 2026-11-22T10:00Z
        #expect(CohortCalendar.newestClosedDay(now: now, windowMicroseconds: 86_400_000_000, in: .gmt) == newest)
    }

    @Test("versions in semantic order")
    func versions() {
        #expect(["2.10.0", "2.9.1", "2.4.0", "10.0", "2.4.0-beta", "2.4.0-beta.2", "2.4.0-alpha", "2.4.0+42", "2.4"].sorted(by: Regressions.versionPrecedes)
                == ["2.4", "2.4.0-alpha", "2.4.0-beta", "2.4.0-beta.2", "2.4.0", "2.4.0+42", "2.9.1", "2.10.0", "10.0"])
        // A total order even for what semantic versioning calls equal, or is not semantic at all.
        let odd = ["1.01", "1.1", "1.10a", "1.9", "1.10", "x", "", "99999999999999999999999.0"]
        for a in odd {
            #expect(!Regressions.versionPrecedes(a, a))
            for b in odd where a != b { #expect(Regressions.versionPrecedes(a, b) != Regressions.versionPrecedes(b, a), "\(a) \(b)") }
        }
    }

    @Test("alerts: thresholds parse, and a bad one names file, funnel and field")
    func configuration() throws {
        func yaml(_ alerts: String) -> String {
            "apps: [{name: a}]\nfunnels:\n  - name: f\n    app: a\n    steps: [{event: x}, {event: y}]\n    alerts: \(alerts)\n"
        }
        let parsed = try FunnelConfiguration.parse(
            yaml: yaml("{alpha: 0.01, min_effect: 0.05, min_persons: 50, recent_days: 14, baseline_days: 56, min_time_effect: 0.5}"),
            source: "f.yaml")
        let alerts = try #require(parsed.funnels.first?.alerts)
        #expect(alerts.alpha == 0.01 && alerts.minEffect == 0.05 && alerts.minPersons == 50)
        #expect(alerts.recentDays == 14 && alerts.baselineDays == 56 && alerts.minTimeEffect == 0.5)
        for (text, message) in [
            ("{alpha: 1.5}", "f.yaml: funnel 'f', alerts.alpha: expected a fraction between 0 and 1 (got 1.5)"),
            ("{recent_days: 0}", "f.yaml: funnel 'f', alerts.recent_days: expected a whole number, at least 1 (got 0.0)"),
            ("{min_persons: many}", "f.yaml: funnel 'f', alerts.min_persons: expected a number, got 'many'"),
            ("{alfa: 0.1}", "f.yaml: funnel 'f', alerts.alfa: unknown field (expected one of: alpha, baseline_days, min_effect, min_persons, min_time_effect, recent_days)"),
        ] {
            #expect(throws: ConfigurationError.self) { try FunnelConfiguration.parse(yaml: yaml(text), source: "f.yaml") }
            do { _ = try FunnelConfiguration.parse(yaml: yaml(text), source: "f.yaml") } catch { #expect(error.description == message) }
        }
    }
}
