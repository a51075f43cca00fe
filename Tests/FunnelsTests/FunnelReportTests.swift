import Foundation
import Testing
@testable import Funnels

@Suite struct FunnelReportTests {
    static let day: Int64 = 86_400
    static let now = base + 5 * day * second

    static func funnel(targets: [FunnelTarget] = []) -> Funnel {
        var funnel = linearFunnel(["a", "b", "c"], exclusions: [.event("x")])
        funnel.targets = targets
        return funnel
    }

    /// Seven persons; see each line.
    static func outcomes(_ funnel: Funnel) -> [PersonOutcome] {
        let iOS = ["context.os.name": "iOS"], android = ["context.os.name": "Android"]
        let timelines: [[FunnelEvent]] = [
            [track("a", at: 0, iOS), track("b", at: 60), track("c", at: 160)],       // completes in 160 s
            [track("a", at: 0, iOS), track("b", at: 100), track("c", at: 400)],      // completes in 400 s
            [track("a", at: 0, android), track("b", at: 30)],                        // drops off at b
            [track("a", at: 5 * day - 3_600, android)],                              // in progress at a
            [track("a", at: 0, iOS), track("x", at: 1), track("b", at: 2)],          // excluded
            [track("b", at: 0)],                                                     // never started
            [track("a", at: 0, iOS)],                                                // drops off at a
        ]
        return timelines.map { FunnelEvaluator.evaluate(events: $0, funnel: funnel, now: now) }
    }

    func close(_ a: Double?, _ b: Double, _ tolerance: Double = 1e-9) -> Bool {
        guard let a else { return false }
        return abs(a - b) <= tolerance
    }

    @Test func stepsDropOffAndConversions() throws {
        let funnel = Self.funnel()
        let report = FunnelReport(funnel: funnel, outcomes: Self.outcomes(funnel), now: Self.now, timeZone: try #require(TimeZone(identifier: "UTC")))
        #expect(report.started == 5)
        #expect(report.completed == 2)
        #expect(report.inProgress == 1)
        #expect(report.excludedPersons == 1)

        #expect(report.steps.map(\.index) == [1, 2, 3])
        #expect(report.steps.map(\.name) == ["a", "b", "c"])
        #expect(report.steps.map(\.persons) == [5, 3, 2])
        #expect(report.steps.map(\.dropOff) == [1, 1, 0])      // in-progress person is not a drop-off
        #expect(report.steps.map(\.inProgress) == [1, 0, 0])
        #expect(report.steps.map(\.conversionFromPrevious.value) == [1.0, 0.6, 2.0 / 3.0])
        #expect(report.steps.map(\.conversionFromStart.value) == [1.0, 0.6, 0.4])
        #expect(report.steps.map(\.medianSecondsFromPrevious) == [nil, 60, 200])
        #expect(report.steps[0].dropOffRate.value == 0.2)

        #expect(report.completionRate.value == 0.4)
        let ci = try #require(report.completionRate.ci95)
        let expected = try #require(Statistics.wilson(successes: 2, trials: 5))
        #expect(ci == expected)
        #expect(report.timeToComplete.completers == 2)
        #expect(report.timeToComplete.medianSeconds == 280)
        #expect(close(report.timeToComplete.p90Seconds, 376))
    }

    @Test func cohortDaysAndInProgressFlag() throws {
        let funnel = Self.funnel()
        let report = FunnelReport(funnel: funnel, outcomes: Self.outcomes(funnel), now: Self.now, timeZone: try #require(TimeZone(identifier: "UTC")))
        #expect(report.cohorts == [
            CohortDay(day: "2025-11-21", started: 4, completed: 2, inProgressPersons: 0, inProgress: false),
            CohortDay(day: "2025-11-26", started: 1, completed: 0, inProgressPersons: 1, inProgress: true),
        ])
        // The 21st's windows close at 22nd 00:00 + 24 h = 23rd 00:00 UTC.
        let closing = base + 14 * 3_600 * second // 2025-11-22T00:00Z
        let early = FunnelReport(funnel: funnel, outcomes: Self.outcomes(funnel), now: closing + Self.day * second - 1, timeZone: try #require(TimeZone(identifier: "UTC")))
        #expect(early.cohorts.first?.inProgress == true)
        let exact = FunnelReport(funnel: funnel, outcomes: Self.outcomes(funnel), now: closing + Self.day * second, timeZone: try #require(TimeZone(identifier: "UTC")))
        #expect(exact.cohorts.first?.inProgress == false)
    }

    @Test func cohortDayUsesReportTimeZone() throws {
        let late = FunnelEvaluator.evaluate(events: [track("a", at: 13 * 3_600 + 1_800)], funnel: Self.funnel(), now: Self.now) // 23:30Z
        let utc = FunnelReport(funnel: Self.funnel(), outcomes: [late], now: Self.now, timeZone: try #require(TimeZone(identifier: "UTC")))
        let paris = FunnelReport(funnel: Self.funnel(), outcomes: [late], now: Self.now, timeZone: try #require(TimeZone(identifier: "Europe/Paris")))
        let angeles = FunnelReport(funnel: Self.funnel(), outcomes: [late], now: Self.now, timeZone: try #require(TimeZone(identifier: "America/Los_Angeles")))
        #expect(utc.cohorts.map(\.day) == ["2025-11-21"])
        #expect(paris.cohorts.map(\.day) == ["2025-11-22"])
        #expect(angeles.cohorts.map(\.day) == ["2025-11-21"])
        #expect(paris.timeZone == "Europe/Paris")
        // Sub-second timestamps and pre-1970 times floor, never round across midnight.
        let tz = try #require(TimeZone(identifier: "UTC"))
        #expect(CohortCalendar.day(of: 86_400 * second - 1, in: tz) == "1970-01-01")
        #expect(CohortCalendar.day(of: -1, in: tz) == "1969-12-31")
        #expect(CohortCalendar.endOfDay(containing: -1, in: tz) == 0)
    }

    @Test func breakdownsAndComparison() throws {
        let funnel = Self.funnel()
        let report = FunnelReport(funnel: funnel, outcomes: Self.outcomes(funnel), now: Self.now, timeZone: try #require(TimeZone(identifier: "UTC")))
        #expect(report.breakdowns.map(\.dimension) == ["context.os.name", "context.app.version"])
        let os = try #require(report.breakdown("context.os.name"))
        // Per step, each value's part of the rows: iOS 3 / 2 / 2, one dropped at step 1; Android 2 / 1, one in progress at step 1, one dropped at 2.
        typealias Step = FunnelTally.Step
        #expect(os.values == [
            BreakdownValue(
                value: "iOS", started: 3, completed: 2, inProgress: 0,
                steps: [Step(persons: 3, dropOff: 1), Step(persons: 2), Step(persons: 2)]),
            BreakdownValue(
                value: "Android", started: 2, completed: 0, inProgress: 1,
                steps: [Step(persons: 2, inProgress: 1), Step(persons: 1, dropOff: 1), Step()]),
        ])
        for (index, row) in report.steps.enumerated() {
            #expect(os.values.map { $0.steps[index].persons }.reduce(0, +) == row.persons)
            #expect(os.values.map { $0.steps[index].dropOff }.reduce(0, +) == row.dropOff)
            #expect(os.values.map { $0.steps[index].inProgress }.reduce(0, +) == row.inProgress)
        }
        #expect(report.breakdown("context.app.version")?.values.map(\.value) == ["(none)"])

        let comparison = try #require(report.compare(breakdown: "context.os.name", a: "iOS", b: "Android"))
        #expect(close(comparison.difference, 2.0 / 3.0))
        #expect(close(comparison.z, 1.4907119849998598))
        #expect(close(comparison.pValue, 0.13603712811414367, 1e-12))
        #expect(report.compare(breakdown: "context.os.name", a: "iOS", b: "Windows") == nil)
        #expect(report.compare(breakdown: "nope", a: "iOS", b: "Android") == nil)
    }

    @Test func targetsMetAndMissed() throws {
        let funnel = Self.funnel(targets: [
            FunnelTarget(name: "completion", metric: .completionRate, bound: .atLeast(0.4)),       // 0.4: met (inclusive)
            FunnelTarget(name: "median", metric: .medianSecondsToComplete, bound: .atMost(280)),   // 280: met
            FunnelTarget(name: "p90", metric: .p90SecondsToComplete, bound: .atMost(300)),         // 376: missed
            FunnelTarget(name: "b_to_c", metric: .conversion(from: "b", to: "c"), bound: .atLeast(0.7)), // 0.667: missed
        ])
        let report = FunnelReport(funnel: funnel, outcomes: Self.outcomes(funnel), now: Self.now, timeZone: try #require(TimeZone(identifier: "UTC")))
        #expect(report.targets.map(\.name) == ["completion", "median", "p90", "b_to_c"])
        #expect(report.targets.map(\.met) == [true, true, false, false])
        #expect(report.targets.map(\.threshold) == [0.4, 280, 300, 0.7])
        #expect(close(report.targets[3].value, 2.0 / 3.0))

        let empty = FunnelReport(funnel: funnel, outcomes: [], now: Self.now, timeZone: try #require(TimeZone(identifier: "UTC")))
        #expect(empty.targets.allSatisfy { !$0.met && $0.value == nil })
        #expect(empty.steps.map(\.persons) == [0, 0, 0])
        #expect(empty.completionRate.value == nil)
        #expect(empty.completionRate.ci95 == nil)
    }

    @Test func optionalStepRow() throws {
        let funnel = Funnel(name: "opt", app: "x", steps: [
            FunnelStep(.event("a")), FunnelStep(.event("o"), isOptional: true), FunnelStep(.event("b")),
        ])
        let outcomes = [
            [track("a", at: 0), track("o", at: 40), track("b", at: 100)],
            [track("a", at: 0), track("b", at: 50)],
            [track("a", at: 0)],
        ].map { FunnelEvaluator.evaluate(events: $0, funnel: funnel, now: FunnelReportTests.now) }
        let report = FunnelReport(funnel: funnel, outcomes: outcomes, now: Self.now, timeZone: try #require(TimeZone(identifier: "UTC")))
        #expect(report.steps.map(\.index) == [1, 2, 3])
        #expect(report.steps.map(\.isOptional) == [false, true, false])
        #expect(report.steps.map(\.persons) == [3, 1, 2])
        #expect(report.steps[1].conversionFromPrevious == Rate(successes: 1, trials: 2))
        #expect(report.steps[1].medianSecondsFromPrevious == 40)
        #expect(report.steps[2].conversionFromPrevious == Rate(successes: 2, trials: 3)) // from a, skipping o
        #expect(report.steps[2].medianSecondsFromPrevious == 75)
        #expect(report.steps.map(\.dropOff) == [1, 0, 0])
    }
}
