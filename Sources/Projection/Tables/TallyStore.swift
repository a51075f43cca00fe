import Funnels
import LibPQ

/// Reads and writes `funnel_tallies`: one `FunnelTally` per funnel and cohort day.
enum TallyStore {
    /// Replaces the tallies of `days` (a day missing from `tallies` keeps none).
    static func rewrite(_ writes: inout DayTableWrites, funnel: Funnel, days: [String], tallies: [String: FunnelTally], timeZone: String) throws {
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

    /// The stored tallies of `days` of `funnels`, by funnel and day.
    static func load(_ c: Connection, funnels: [Funnel], days: some Collection<FunnelDay>) throws -> [String: [String: Stored]] {
        guard !days.isEmpty else { return [:] }
        return try load(c, funnels: funnels, where: FunnelDay.anyOf, FunnelDay.parameters(days))
    }

    /// The stored tallies of the funnels' cohort days `filter` picks (SQL on
    /// `funnel` and `cohort_day`, its parameters from $1), by funnel and
    /// day, in one statement.
    static func load(
        _ c: Connection, funnels: [Funnel], where filter: String, _ parameters: [PostgresValue]
    ) throws -> [String: [String: Stored]] {
        let byName = Dictionary(funnels.map { ($0.name, $0) }) { first, _ in first }
        var tallies: [String: [String: Stored]] = [:]
        // In binary: as text the tallies would be twice their size in hex,
        // to send and decode again.
        try c.forEachBinaryRow("SELECT funnel, cohort_day::text, time_zone, tally FROM funnel_tallies WHERE \(filter)", parameters) { row in
            let name = try row.required(0, row.text)
            guard let funnel = byName[name] else { return }
            let bytes = try row.required(3, row.bytes)
            tallies[name, default: [:]][try row.required(1, row.text)] = Stored(
                timeZone: try row.required(2, row.text), tally: try TallyEncoding.decode(bytes, funnel: funnel),
                current: bytes.first == TallyEncoding.version)
        }
        return tallies
    }

    /// Some funnels' stored day tallies, and the funnels with a day cut in
    /// another time zone than the report's, or stored before the
    /// per-version counts: only the persons' outcomes can answer for those.
    struct Days {
        var tallies: [String: [String: FunnelTally]] = [:]
        var inconsistent: Set<String> = []
    }

    /// The tallies of the funnels' cohort days `filter` picks (`load`),
    /// each funnel's as cut in its `timeZones` zone.
    static func days(
        _ c: Connection, funnels: [Funnel], timeZones: [String: String], where filter: String, _ parameters: [PostgresValue]
    ) throws -> Days {
        var days = Days()
        for (name, stored) in try load(c, funnels: funnels, where: filter, parameters) {
            if stored.values.allSatisfy({ $0.timeZone == timeZones[name] && $0.current }) {
                days.tallies[name] = stored.mapValues(\.tally)
            } else {
                days.inconsistent.insert(name)
            }
        }
        return days
    }
}
