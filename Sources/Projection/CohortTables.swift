import Foundation
import Funnels
import LibPQ

/// Rewrites `funnel_daily` and `funnel_cohorts` for the cohort days that changed,
/// aggregating the stored per-person outcomes with the engine's `FunnelReport`.
enum CohortTables {
    static func rewrite(_ c: Connection, funnel: Funnel, days: Set<String>, now: Int64, timeZone: TimeZone) throws {
        guard !days.isEmpty else { return }
        let list = days.sorted()
        try c.query("DELETE FROM funnel_daily WHERE funnel = $1 AND cohort_day = ANY($2::date[])", [.text(funnel.name), .textArray(list)])
        try c.query("DELETE FROM funnel_cohorts WHERE funnel = $1 AND cohort_day = ANY($2::date[])", [.text(funnel.name), .textArray(list)])
        var stepRows: [[PostgresValue]] = []
        var cohortRows: [[PostgresValue]] = []
        try OutcomeStore.forEachDay(c, funnel: funnel, days: list) { day, outcomes in
            let report = FunnelReport(funnel: funnel, outcomes: outcomes, now: now, timeZone: timeZone)
            guard report.started > 0 || report.excludedPersons > 0 else { return }
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
        try c.copyIn(
            """
            COPY funnel_daily (funnel, app, cohort_day, step_index, step_name, optional, persons, drop_off, in_progress,
                               conversion_from_previous, conversion_from_start, median_seconds_from_previous) FROM STDIN
            """
        ) { writer in for row in stepRows { try writer.writeRow(row) } }
        try c.copyIn(
            """
            COPY funnel_cohorts (funnel, app, cohort_day, started, completed, in_progress_persons, excluded_persons,
                                 completion_rate, completion_ci_low, completion_ci_high, median_seconds_to_complete,
                                 p90_seconds_to_complete, in_progress) FROM STDIN
            """
        ) { writer in for row in cohortRows { try writer.writeRow(row) } }
    }

    private static func optional(_ value: Double?) -> PostgresValue { value.map { .double($0) } ?? .null }
}
