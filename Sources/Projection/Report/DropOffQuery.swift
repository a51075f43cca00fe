import Funnels
import LibPQ

/// Counts the drop-off diagnostics of a range of cohort days again, from the
/// persons (the stored days' counts are read with the report's other day
/// tables, `StoredReportDays`).
enum DropOffQuery {
    /// The counts of `funnel`'s cohort days `from...to` (either end open) cut
    /// in `timeZone` (a report in another zone than the stored days'): from
    /// the persons whose start falls in the range there, counted from their rows.
    static func counts(_ c: Connection, funnel: Funnel, from: String?, to: String?, timeZone: String) throws -> DropOffCounts {
        var tally: (any AnalysisTally)?
        try DropOffAnalysis.forEachCounted(
            c, from: "funnel_persons p",
            where: """
                p.funnel = $1 AND \(OutcomeStore.windowClosed)
                AND ($2::date IS NULL OR (p.start_time AT TIME ZONE $4)::date >= $2::date)
                AND ($3::date IS NULL OR (p.start_time AT TIME ZONE $4)::date <= $3::date)
                """, [.text(funnel.name), .optional(from), .optional(to), .text(timeZone)],
            shapes: [funnel.name: DropOffFacts.Shape(funnel)]
        ) { _, add in add(&tally) }
        return (tally as? DropOffAnalysis.Tally)?.counts ?? DropOffCounts()
    }
}
