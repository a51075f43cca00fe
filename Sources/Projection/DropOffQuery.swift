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
        if let timeZone {
            let filter = """
                ($2::date IS NULL OR (p.start_time AT TIME ZONE $4)::date >= $2::date)
                AND ($3::date IS NULL OR (p.start_time AT TIME ZONE $4)::date <= $3::date)
                """
            for day in try DropOffAnalysis.readBack(c, funnel: funnel, where: filter, [.optional(from), .optional(to), .text(timeZone)]).values {
                counts.merge(day)
            }
            return counts
        }
        let parameters: [PostgresValue] = [.text(funnel.name), .optional(from), .optional(to)]
        let days = "funnel = $1 AND ($2::date IS NULL OR cohort_day >= $2::date) AND ($3::date IS NULL OR cohort_day <= $3::date)"
        try c.forEachRow("SELECT step_index, lingering_us FROM funnel_step_lingering WHERE \(days)", parameters) { row in
            counts.lingering[try row.decode(Int.self, at: 0) - 1, default: []]
                += (try row.decode(PostgresArrayText.self, at: 1).integers() ?? []).compactMap { $0 }
        }
        try c.forEachRow("SELECT step_index, label, persons FROM funnel_dropoff_next WHERE \(days)", parameters) { row in
            counts.next[try row.decode(Int.self, at: 0) - 1, default: [:]][try row.decode(String.self, at: 1), default: 0]
                += try row.decode(Int.self, at: 2)
        }
        try c.forEachRow(
            "SELECT from_index, kind, dimension, value, converted, dropped FROM funnel_driver_counts WHERE \(days)", parameters
        ) { row in
            let step = try row.decode(Int.self, at: 0) - 1
            let pair = DropOffCounts.Pair(converted: try row.decode(Int.self, at: 4), dropped: try row.decode(Int.self, at: 5))
            guard let kind = DropOffDiagnostics.Kind(rawValue: try row.decode(String.self, at: 1)) else {
                counts.transitions[step, default: .init()].add(pair)
                return
            }
            let candidate = DropOffCounts.Candidate(
                stepIndex: step, kind: kind, dimension: try row.decode(String.self, at: 2), value: try row.decode(String.self, at: 3))
            counts.candidates[candidate, default: .init()].add(pair)
        }
        return counts
    }
}
