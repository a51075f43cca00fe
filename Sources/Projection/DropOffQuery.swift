import Funnels
import LibPQ

/// Adds up the stored drop-off diagnostics of a range of cohort days.
enum DropOffQuery {
    /// The counts of `funnel`'s cohort days `from...to` (either end open),
    /// from the day tables. With `timeZone` set (a report cut in another zone
    /// than the stored days), from the persons whose start falls in the range
    /// in that zone instead, counted from their rows.
    static func counts(_ c: Connection, funnel: Funnel, from: String?, to: String?, timeZone: String? = nil) throws -> DropOffCounts {
        var counts = DropOffCounts()
        guard let timeZone else {
            let range = "($2::date IS NULL OR cohort_day >= $2::date) AND ($3::date IS NULL OR cohort_day <= $3::date)"
            for day in try DropOffAnalysis.stored(c, funnel: funnel, where: range, [.optional(from), .optional(to)]).values {
                counts.merge(day)
            }
            return counts
        }
        var tally: (any AnalysisTally)?
        try DropOffAnalysis.forEachCounted(
            c, from: "funnel_persons p",
            where: """
                p.funnel = $1 AND NOT p.in_progress
                AND ($2::date IS NULL OR (p.start_time AT TIME ZONE $4)::date >= $2::date)
                AND ($3::date IS NULL OR (p.start_time AT TIME ZONE $4)::date <= $3::date)
                """, [.text(funnel.name), .optional(from), .optional(to), .text(timeZone)],
            shapes: [funnel.name: DropOffFacts.Shape(funnel)]
        ) { _, add in add(&tally) }
        return (tally as? DropOffAnalysis.Tally)?.counts ?? counts
    }
}
