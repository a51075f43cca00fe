import Foundation
import Funnels
import LibPQ

/// Adds up the stored retention of a range of cohort days.
enum RetentionQuery {
    /// The retention of `funnel`'s cohort days `from...to` (either end open)
    /// as the last run counted it, from `funnel_retention`. With `timeZone`
    /// set (a report cut in another zone than the stored days), from the
    /// persons whose start falls in the range in that zone, counted at `now`.
    static func report(
        _ c: Connection, funnel: Funnel, from: String?, to: String?, timeZone: String? = nil, now: Int64
    ) throws -> RetentionReport {
        var cells: [String: [RetentionCell]] = [:]
        guard let timeZone else {
            try c.forEachRow(
                """
                SELECT cohort_day::text, day_n, completed, eligible, retained, pending FROM funnel_retention
                WHERE funnel = $1 AND ($2::date IS NULL OR cohort_day >= $2::date) AND ($3::date IS NULL OR cohort_day <= $3::date)
                """, [.text(funnel.name), .optional(from), .optional(to)]
            ) { row in
                let counts = RetentionSide(
                    eligible: try row.decode(Int.self, at: 3), retained: try row.decode(Int.self, at: 4),
                    pending: try row.decode(Int.self, at: 5))
                cells[try row.decode(String.self, at: 0), default: []].append(
                    RetentionCell(day: try row.decode(Int.self, at: 1), completed: try row.decode(Bool.self, at: 2), counts: counts))
            }
            return RetentionReport(days: funnel.retention.days, cells: cells)
        }
        var days: [String: RetentionCounts] = [:]
        let zone = TimeZone(identifier: timeZone) ?? .gmt
        try RetentionAnalysis(funnels: [funnel]).forEachCounted(
            c, from: "funnel_persons p",
            where: """
                p.funnel = $1 AND NOT p.in_progress
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
