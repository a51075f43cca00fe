import Foundation
import Funnels
import LibPQ

/// Reads the retention of cohort days: as the last run stored it, or
/// counted again from the persons.
enum RetentionQuery {
    /// The stored retention cells of the funnels' days `filter` picks (SQL
    /// on `funnel` and `cohort_day`, its parameters from $1), by funnel and
    /// cohort day, as the last run counted them, from `funnel_retention`.
    static func cells(_ c: Connection, where filter: String, _ parameters: [PostgresValue]) throws -> [String: [String: [RetentionCell]]] {
        var cells: [String: [String: [RetentionCell]]] = [:]
        try c.forEachBinaryRow(
            "SELECT funnel, cohort_day::text, day_n, completed, eligible, retained, pending FROM funnel_retention WHERE \(filter)", parameters
        ) { row in
            let counts = RetentionSide(
                eligible: try row.required(4, row.int), retained: try row.required(5, row.int), pending: try row.required(6, row.int))
            cells[try row.required(0, row.text), default: [:]][try row.required(1, row.text), default: []].append(
                RetentionCell(day: try row.required(2, row.int), completed: try row.required(3, row.bool), counts: counts))
        }
        return cells
    }

    /// The retention of `funnel`'s cohort days `from...to` (either end open)
    /// cut in `timeZone` (a report in another zone than the stored days'):
    /// from the persons whose start falls in the range there, counted at `now`.
    static func report(
        _ c: Connection, funnel: Funnel, from: String?, to: String?, timeZone: String, now: Int64
    ) throws -> RetentionReport {
        var days: [String: RetentionCounts] = [:]
        let zone = TimeZone(identifier: timeZone) ?? .gmt
        try RetentionAnalysis(funnels: [funnel]).forEachCounted(
            c, from: "funnel_persons p",
            where: """
                p.funnel = $1 AND \(OutcomeStore.windowClosed)
                AND ($2::date IS NULL OR (p.start_time AT TIME ZONE $4)::date >= $2::date)
                AND ($3::date IS NULL OR (p.start_time AT TIME ZONE $4)::date <= $3::date)
                """, [.text(funnel.name), .optional(from), .optional(to), .text(timeZone)]
        ) { _, start, completed, retained in
            let day = CohortCalendar.day(of: start, in: zone)
            days[day, default: RetentionCounts()].add(start: start, completed: completed, retainedDays: retained)
        }
        return RetentionReport(days: funnel.retention.days, cells: days.mapValues { $0.cells(days: funnel.retention.days, now: now) })
    }
}
