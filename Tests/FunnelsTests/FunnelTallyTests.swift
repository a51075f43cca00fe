import Foundation
import TestSupport
import Testing
@testable import Funnels

/// Tallies are what the nightly job stores per cohort day and adds up for the
/// printed report, so adding day tallies must give exactly the report of all
/// the persons at once.
@Suite struct FunnelTallyTests {
    static let utc = TimeZone(identifier: "UTC") ?? .gmt

    /// Random persons of a random funnel, spread over `days` days, with breakdown values.
    static func persons(_ rng: inout SplitMix, funnel: Funnel, count: Int, days: Int64, now: Int64) -> [PersonOutcome] {
        (0..<count).map { _ in
            let dayStart = Int64(rng.next() % UInt64(days)) * 86_400_000_000
            var timeline = FunnelEvaluatorPropertyTests.randomTimeline(&rng).map { event in
                var shifted = event
                shifted.timestamp += dayStart
                return shifted
            }
            if rng.next() % 2 == 0, !timeline.isEmpty {
                timeline[0].attributes["context.os.name"] = ["iOS", "Android"][Int(rng.next() % 2)]
            }
            return FunnelEvaluator.evaluate(events: timeline, funnel: funnel, now: now)
        }
    }

    @Test(arguments: [UInt64(11), 12, 13, 14])
    func dayTalliesAddUpToTheWholeReport(seed: UInt64) {
        var rng = SplitMix(seed: seed)
        var nonTrivial = 0
        for _ in 0..<60 {
            var funnel = FunnelEvaluatorPropertyTests.randomFunnel(&rng)
            funnel.breakdowns = ["context.os.name"]
            funnel.exclusions = rng.next() % 3 == 0 ? [.event("c")] : []
            // Some windows of the last day still open.
            let now = 4 * 86_400_000_000 + Int64(rng.next() % 12) * 1_000_000
            let outcomes = Self.persons(&rng, funnel: funnel, count: 40, days: 5, now: now)
            let whole = FunnelReport(funnel: funnel, outcomes: outcomes, now: now, timeZone: Self.utc)

            let shape = FunnelTally.Shape(funnel)
            var byDay: [String: FunnelTally] = [:]
            var noStart = FunnelTally(funnel: funnel)
            for outcome in outcomes {
                guard let start = outcome.startTime else {
                    noStart.add(outcome, shape: shape, cohortDay: nil, timeZone: Self.utc)
                    continue
                }
                let day = CohortCalendar.day(of: start, in: Self.utc)
                byDay[day, default: FunnelTally(funnel: funnel)].add(outcome, shape: shape, cohortDay: day, timeZone: Self.utc)
            }
            var sum = noStart
            for day in byDay.keys.shuffled(using: &rng) { sum.merge(byDay[day] ?? FunnelTally(funnel: funnel)) }
            #expect(FunnelReport(funnel: funnel, tally: sum, now: now, timeZone: Self.utc) == whole, "\(funnel.steps)")
            #expect(sum.normalized() == FunnelTally(funnel: funnel, outcomes: outcomes, timeZone: Self.utc).normalized())
            if whole.completed > 0 && whole.cohorts.count > 1 && whole.steps.count > 1 { nonTrivial += 1 }
        }
        #expect(nonTrivial > 10)
    }

    /// What an incremental run does to a stored day: take some persons out,
    /// put their new outcomes in; the result must be the tally of the persons
    /// it now holds, down to the empty cohorts and breakdown values it drops.
    @Test(arguments: [UInt64(21), 22, 23])
    func replacingPersonsGivesTheTallyOfWhoIsLeft(seed: UInt64) {
        var rng = SplitMix(seed: seed)
        for _ in 0..<60 {
            var funnel = FunnelEvaluatorPropertyTests.randomFunnel(&rng)
            funnel.breakdowns = ["context.os.name"]
            funnel.exclusions = rng.next() % 3 == 0 ? [.event("c")] : []
            let now = 4 * 86_400_000_000 + Int64(rng.next() % 12) * 1_000_000
            let kept = Self.persons(&rng, funnel: funnel, count: Int(rng.next() % 30), days: 3, now: now)
            let replaced = Self.persons(&rng, funnel: funnel, count: Int(rng.next() % 30), days: 3, now: now)
            let replacements = Self.persons(&rng, funnel: funnel, count: Int(rng.next() % 30), days: 3, now: now)

            var stored = FunnelTally(funnel: funnel, outcomes: (kept + replaced).shuffled(using: &rng), timeZone: Self.utc)
            stored.subtract(FunnelTally(funnel: funnel, outcomes: replaced, timeZone: Self.utc))
            #expect(stored.normalized() == FunnelTally(funnel: funnel, outcomes: kept, timeZone: Self.utc).normalized())
            stored.merge(FunnelTally(funnel: funnel, outcomes: replacements, timeZone: Self.utc))
            #expect(stored.normalized() == FunnelTally(funnel: funnel, outcomes: kept + replacements, timeZone: Self.utc).normalized())
        }
        // Everyone taken out leaves the empty tally.
        let funnel = FunnelEvaluatorPropertyTests.randomFunnel(&rng)
        let all = Self.persons(&rng, funnel: funnel, count: 25, days: 3, now: 4 * 86_400_000_000)
        var tally = FunnelTally(funnel: funnel, outcomes: all, timeZone: Self.utc)
        tally.subtract(FunnelTally(funnel: funnel, outcomes: all.reversed(), timeZone: Self.utc))
        #expect(tally.normalized() == FunnelTally(funnel: funnel))
        #expect(tally.isEmpty)
    }

    /// What a report does with its days: their total, made in one go
    /// (`total(of:)`), equals adding them one by one (in order, once sorted).
    @Test(arguments: [UInt64(31), 32, 33])
    func theTotalOfDaysEqualsAddingThemOneByOne(seed: UInt64) {
        var rng = SplitMix(seed: seed)
        for _ in 0..<40 {
            let funnel = FunnelEvaluatorPropertyTests.randomFunnel(&rng)
            let now: Int64 = 6 * 86_400_000_000
            let days: [FunnelTally] = (0..<Int(rng.next() % 8)).map { _ in
                FunnelTally(funnel: funnel, outcomes: Self.persons(&rng, funnel: funnel, count: Int(rng.next() % 20), days: 5, now: now), timeZone: Self.utc)
            }
            var added = FunnelTally(funnel: funnel)
            for day in days { added.merge(day) }
            added.durations.sort()
            for index in added.steps.indices { added.steps[index].gaps.sort() }
            for value in Array(added.versions.keys) { added.versions[value]?.durations.sort() }
            #expect(FunnelTally.total(of: days, funnel: funnel).normalized() == added)
            #expect(added.normalized() == added)
        }
    }

    @Test func countsAndDurationsOfAHandMadeSet() throws {
        let funnel = FunnelReportTests.funnel()
        let tally = FunnelTally(funnel: funnel, outcomes: FunnelReportTests.outcomes(funnel), timeZone: Self.utc)
        #expect(tally.started == 5)
        #expect(tally.completed == 2)
        #expect(tally.inProgress == 1)
        #expect(tally.excluded == 1)
        #expect(tally.durations.sorted() == [160_000_000, 400_000_000])
        #expect(tally.steps.map(\.persons) == [5, 3, 2])
        #expect(tally.steps.map(\.dropOff) == [1, 1, 0])
        #expect(tally.steps.map(\.inProgress) == [1, 0, 0])
        #expect(tally.steps[1].gaps.sorted() == [30_000_000, 60_000_000, 100_000_000])
        typealias Step = FunnelTally.Step
        #expect(tally.breakdowns["context.os.name"]?["iOS"]
            == FunnelTally.Group(started: 3, completed: 2, inProgress: 0, steps: [Step(persons: 3, dropOff: 1), Step(persons: 2), Step(persons: 2)]))
        #expect(tally.breakdowns["context.os.name"]?["Android"]
            == FunnelTally.Group(started: 2, completed: 0, inProgress: 1, steps: [Step(persons: 2, inProgress: 1), Step(persons: 1, dropOff: 1), Step()]))
    }
}
