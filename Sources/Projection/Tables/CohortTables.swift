import Foundation
import Funnels
import LibPQ

/// Rewrites `funnel_daily`, `funnel_cohorts` and `funnel_tallies` for the
/// cohort days that changed, from each day's `FunnelTally`.
enum CohortTables {
    /// The tallies of the stored outcomes on `days` (an incremental run: the
    /// days hold persons it did not recompute).
    static func tallies(_ c: Connection, funnel: Funnel, days: Set<String>, timeZone: TimeZone) throws -> [String: FunnelTally] {
        var tallies: [String: FunnelTally] = [:]
        try OutcomeStore.forEachDay(c, funnel: funnel, days: days.sorted()) { day, outcomes in
            tallies[day] = FunnelTally(funnel: funnel, outcomes: outcomes, timeZone: timeZone)
        }
        return tallies
    }

    /// An incremental run's tallies of `days`: each day's `stored` tally with
    /// the recomputed persons' old outcomes (`removed`) taken out and their new
    /// ones (`added`) put in, so the persons it did not recompute are never
    /// read. A day tallied in another time zone, stored before there were
    /// tallies (`untallied`: cohort rows without one), or stored before the
    /// per-version counts, is tallied from its persons instead. A day with neither is new: it holds only `added`.
    static func replacing(
        _ c: Connection, funnel: Funnel, days: Set<String>, stored: [String: TallyStore.Stored], removed: [String: FunnelTally],
        added: [String: FunnelTally], untallied: Set<String>, timeZone: TimeZone, timeZoneName: String
    ) throws -> [String: FunnelTally] {
        var result: [String: FunnelTally] = [:]
        var reread = Set<String>()
        for day in days {
            if untallied.contains(day) || stored[day].map({ $0.timeZone != timeZoneName || !$0.current }) == true {
                reread.insert(day)
                continue
            }
            var tally = stored[day]?.tally ?? FunnelTally(funnel: funnel)
            if let old = removed[day] { tally.subtract(old) }
            if let new = added[day] { tally.merge(new) }
            result[day] = tally
        }
        if !reread.isEmpty { result.merge(try tallies(c, funnel: funnel, days: reread, timeZone: timeZone)) { _, read in read } }
        return result
    }

    /// Replaces the rows of `days` with those of `tallies` (a day without a
    /// tally, or with an empty one, has none).
    static func rewrite(
        _ writes: inout DayTableWrites, funnel: Funnel, days: Set<String>, tallies: [String: FunnelTally], now: Int64, timeZone: TimeZone,
        timeZoneName: String
    ) throws {
        guard !days.isEmpty else { return }
        let list = days.sorted()
        writes.delete(from: "funnel_daily", funnel: funnel.name, days: list)
        writes.delete(from: "funnel_cohorts", funnel: funnel.name, days: list)
        var stepRows: [[PostgresValue]] = []
        var cohortRows: [[PostgresValue]] = []
        for day in list {
            guard let tally = tallies[day], !tally.isEmpty else { continue }
            let report = FunnelReport(funnel: funnel, tally: tally, now: now, timeZone: timeZone)
            for step in report.steps {
                stepRows.append([
                    .text(funnel.name), .text(funnel.app), .text(day), .int(step.index), .text(step.name), .bool(step.isOptional),
                    .int(step.persons), .int(step.dropOff), .int(step.inProgress),
                    optional(step.conversionFromPrevious.value), optional(step.conversionFromStart.value),
                    optional(step.medianSecondsFromPrevious),
                ])
            }
            let rate = report.completionRate
            let windowOpen = report.cohorts.first(where: { $0.day == day })?.inProgress ?? false
            cohortRows.append([
                .text(funnel.name), .text(funnel.app), .text(day), .int(report.started), .int(report.completed),
                .int(report.inProgress), .int(report.excludedPersons), optional(rate.value), optional(rate.ci95?.lower),
                optional(rate.ci95?.upper), optional(report.timeToComplete.medianSeconds),
                optional(report.timeToComplete.p90Seconds), .bool(windowOpen),
            ])
        }
        try writes.copy(
            """
            COPY funnel_daily (funnel, app, cohort_day, step_index, step_name, optional, persons, drop_off, in_progress,
                               conversion_from_previous, conversion_from_start, median_seconds_from_previous) FROM STDIN
            """
        ) { rows in for row in stepRows { try rows.append(row) } }
        try writes.copy(
            """
            COPY funnel_cohorts (funnel, app, cohort_day, started, completed, in_progress_persons, excluded_persons,
                                 completion_rate, completion_ci_low, completion_ci_high, median_seconds_to_complete,
                                 p90_seconds_to_complete, in_progress) FROM STDIN
            """
        ) { rows in for row in cohortRows { try rows.append(row) } }
        try TallyStore.rewrite(&writes, funnel: funnel, days: list, tallies: tallies, timeZone: timeZoneName)
    }

    private static func optional(_ value: Double?) -> PostgresValue { value.map { .double($0) } ?? .null }
}
