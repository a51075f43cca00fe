import Funnels
import LibPQ

/// Adds up the stored drop-off diagnostics of a range of cohort days.
enum DropOffQuery {
    /// The counts of `funnel`'s cohort days `from...to` (either end open).
    /// With `timeZone` set (a report cut in another zone than the stored
    /// days), persons are picked by their start in that zone instead, and
    /// the day tables' SELECTs run over them directly.
    static func counts(_ c: Connection, funnel: Funnel, from: String?, to: String?, timeZone: String? = nil) throws -> DropOffCounts {
        let range: [PostgresValue] = [.text(funnel.name), .optional(from), .optional(to)]
        let lingering: String, next: String, drivers: String
        let parameters: [PostgresValue], driverParameters: [PostgresValue]
        if let timeZone {
            let filter = """
                p.funnel = $1 AND ($2::date IS NULL OR (p.start_time AT TIME ZONE $4)::date >= $2::date)
                AND ($3::date IS NULL OR (p.start_time AT TIME ZONE $4)::date <= $3::date)
                """
            parameters = range + [.text(timeZone)]
            driverParameters = parameters + [DropOffAnalysis.requiredIndices(funnel)]
            lingering = DropOffAnalysis.lingering(filter)
            next = DropOffAnalysis.next(filter)
            drivers = DropOffAnalysis.drivers(filter, required: "$5::int[]")
        } else {
            let days = "funnel = $1 AND ($2::date IS NULL OR cohort_day >= $2::date) AND ($3::date IS NULL OR cohort_day <= $3::date)"
            parameters = range
            driverParameters = range
            lingering = "SELECT * FROM funnel_step_lingering WHERE \(days)"
            next = "SELECT * FROM funnel_dropoff_next WHERE \(days)"
            drivers = "SELECT * FROM funnel_driver_counts WHERE \(days)"
        }
        var counts = DropOffCounts()
        // Columns as the day tables have them: (funnel, app, cohort_day, step_index, step_name, …).
        try c.forEachRow("SELECT t.* FROM (\(lingering)) t", parameters) { row in
            let step = try row.decode(Int.self, at: 3) - 1
            counts.lingering[step, default: []] += (try row.decode(PostgresArrayText.self, at: 6).integers() ?? []).compactMap { $0 }
        }
        try c.forEachRow("SELECT t.* FROM (\(next)) t", parameters) { row in
            let step = try row.decode(Int.self, at: 3) - 1
            counts.next[step, default: [:]][try row.decode(String.self, at: 5), default: 0] += try row.decode(Int.self, at: 6)
        }
        try c.forEachRow("SELECT t.* FROM (\(drivers)) t", driverParameters) { row in
            let step = try row.decode(Int.self, at: 3) - 1
            let pair = DropOffCounts.Pair(converted: try row.decode(Int.self, at: 8), dropped: try row.decode(Int.self, at: 9))
            let kind = try row.decode(String.self, at: 5)
            guard let candidateKind = DropOffDiagnostics.Kind(rawValue: kind) else {
                counts.transitions[step, default: .init()].add(pair)
                return
            }
            let candidate = DropOffCounts.Candidate(
                stepIndex: step, kind: candidateKind, dimension: try row.decode(String.self, at: 6), value: try row.decode(String.self, at: 7))
            counts.candidates[candidate, default: .init()].add(pair)
        }
        return counts
    }
}
