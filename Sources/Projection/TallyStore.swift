import Funnels
import LibPQ

/// Reads and writes `funnel_tallies`: one `FunnelTally` per funnel and cohort day.
enum TallyStore {
    /// Replaces the tallies of `days` (a day missing from `tallies` keeps none).
    static func rewrite(_ writes: inout DayWrites, funnel: Funnel, days: [String], tallies: [String: FunnelTally], timeZone: String) throws {
        writes.delete(from: "funnel_tallies", funnel: funnel.name, days: days)
        try writes.copy("COPY funnel_tallies (funnel, cohort_day, time_zone, tally) FROM STDIN") { rows in
            for day in days {
                guard let tally = tallies[day], !tally.isEmpty else { continue }
                try rows.append([.text(funnel.name), .text(day), .text(timeZone), .bytes(TallyEncoding.encode(tally))])
            }
        }
    }

    /// A stored day tally, the time zone it was cut in, and whether it is in
    /// the current form: one written before the per-version counts lacks
    /// them, so its day must be counted again from the persons.
    struct Stored {
        var timeZone: String
        var tally: FunnelTally
        var current: Bool
    }

    /// The stored tallies of `days`.
    static func load(_ c: Connection, funnel: Funnel, days: [String]) throws -> [String: Stored] {
        var tallies: [String: Stored] = [:]
        try c.forEachRow(
            "SELECT cohort_day::text, time_zone, tally FROM funnel_tallies WHERE funnel = $1 AND cohort_day = ANY($2::date[])",
            [.text(funnel.name), .textArray(days)]
        ) { row in
            let bytes = try row.decode(PostgresBytes.self, at: 2).bytes
            tallies[try row.decode(String.self, at: 0)] = Stored(
                timeZone: try row.decode(String.self, at: 1), tally: try TallyEncoding.decode(bytes, funnel: funnel),
                current: bytes.first == TallyEncoding.version)
        }
        return tallies
    }

    /// The funnel's tallies on the cohort days `filter` picks (SQL on
    /// `cohort_day`, its parameters from $2), by day, or nil when some of
    /// them were cut in another time zone than `timeZone`, or stored before
    /// the per-version counts: then only the persons' outcomes can answer.
    static func days(
        _ c: Connection, funnel: Funnel, where filter: String, _ parameters: [PostgresValue], timeZone: String
    ) throws -> [String: FunnelTally]? {
        var days: [String: FunnelTally] = [:]
        var consistent = true
        try c.forEachRow(
            "SELECT cohort_day::text, time_zone, tally FROM funnel_tallies WHERE funnel = $1 AND \(filter)",
            [.text(funnel.name)] + parameters
        ) { row in
            guard consistent else { return }
            let bytes = try row.decode(PostgresBytes.self, at: 2).bytes
            guard try row.decode(String.self, at: 1) == timeZone, bytes.first == TallyEncoding.version else {
                consistent = false
                return
            }
            days[try row.decode(String.self, at: 0)] = try TallyEncoding.decode(bytes, funnel: funnel)
        }
        return consistent ? days : nil
    }
}
