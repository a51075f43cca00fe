import Funnels
import LibPQ

/// Reads and writes `funnel_tallies`: one `FunnelTally` per funnel and cohort day.
enum TallyStore {
    /// Replaces the tallies of `days` (a day missing from `tallies` keeps none).
    static func rewrite(_ c: Connection, funnel: Funnel, days: [String], tallies: [String: FunnelTally], timeZone: String) throws {
        try c.query("DELETE FROM funnel_tallies WHERE funnel = $1 AND cohort_day = ANY($2::date[])", [.text(funnel.name), .textArray(days)])
        try c.copyIn("COPY funnel_tallies (funnel, cohort_day, time_zone, tally) FROM STDIN") { writer in
            for day in days {
                guard let tally = tallies[day], !tally.isEmpty else { continue }
                try writer.writeRow([.text(funnel.name), .text(day), .text(timeZone), .bytes(TallyEncoding.encode(tally))])
            }
        }
    }

    /// The stored tallies of `days`, each with the time zone it was cut in.
    static func load(_ c: Connection, funnel: Funnel, days: [String]) throws -> [String: (timeZone: String, tally: FunnelTally)] {
        var tallies: [String: (timeZone: String, tally: FunnelTally)] = [:]
        try c.forEachRow(
            "SELECT cohort_day::text, time_zone, tally FROM funnel_tallies WHERE funnel = $1 AND cohort_day = ANY($2::date[])",
            [.text(funnel.name), .textArray(days)]
        ) { row in
            tallies[try row.decode(String.self, at: 0)] = (
                try row.decode(String.self, at: 1), try TallyEncoding.decode(try row.decode(PostgresBytes.self, at: 2).bytes, funnel: funnel)
            )
        }
        return tallies
    }

    /// The funnel's tallies on cohort days `from...to` (either end open), by
    /// day, or nil when some of them were cut in another time zone than
    /// `timeZone`: then only the persons' outcomes can answer.
    static func days(_ c: Connection, funnel: Funnel, from: String?, to: String?, timeZone: String) throws -> [String: FunnelTally]? {
        var days: [String: FunnelTally] = [:]
        var consistent = true
        try c.forEachRow(
            """
            SELECT cohort_day::text, time_zone, tally FROM funnel_tallies
            WHERE funnel = $1 AND ($2::date IS NULL OR cohort_day >= $2::date) AND ($3::date IS NULL OR cohort_day <= $3::date)
            """, [.text(funnel.name), .optional(from), .optional(to)]
        ) { row in
            guard consistent else { return }
            guard try row.decode(String.self, at: 1) == timeZone else {
                consistent = false
                return
            }
            days[try row.decode(String.self, at: 0)] = try TallyEncoding.decode(try row.decode(PostgresBytes.self, at: 2).bytes, funnel: funnel)
        }
        return consistent ? days : nil
    }
}
