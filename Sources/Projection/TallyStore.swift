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

    /// The stored tallies of `days` of `funnels`, by funnel and day.
    static func load(_ c: Connection, funnels: [Funnel], days: some Collection<FunnelDay>) throws -> [String: [String: Stored]] {
        let byName = Dictionary(funnels.map { ($0.name, $0) }) { first, _ in first }
        var tallies: [String: [String: Stored]] = [:]
        guard !days.isEmpty else { return tallies }
        try c.forEachRow(
            "SELECT funnel, cohort_day::text, time_zone, tally FROM funnel_tallies WHERE \(FunnelDay.anyOf)", FunnelDay.parameters(days)
        ) { row in
            let name = try row.decode(String.self, at: 0)
            guard let funnel = byName[name] else { return }
            let bytes = try row.decode(PostgresBytes.self, at: 3).bytes
            tallies[name, default: [:]][try row.decode(String.self, at: 1)] = Stored(
                timeZone: try row.decode(String.self, at: 2), tally: try TallyEncoding.decode(bytes, funnel: funnel),
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
        let read = try days(c, funnels: [funnel], timeZones: [funnel.name: timeZone], where: "funnel = $1 AND \(filter)", [.text(funnel.name)] + parameters)
        return read.inconsistent.contains(funnel.name) ? nil : read.tallies[funnel.name] ?? [:]
    }

    /// Some funnels' stored day tallies, and which of the funnels have a day
    /// that only the persons' outcomes can answer (`days(_:funnel:…)`).
    struct Days {
        var tallies: [String: [String: FunnelTally]] = [:]
        var inconsistent: Set<String> = []
    }

    /// The tallies of the funnels' cohort days `filter` picks (SQL on
    /// `funnel` and `cohort_day`, its parameters from $1), each funnel's
    /// cut in its `timeZones` zone, in one statement.
    static func days(
        _ c: Connection, funnels: [Funnel], timeZones: [String: String], where filter: String, _ parameters: [PostgresValue]
    ) throws -> Days {
        let byName = Dictionary(funnels.map { ($0.name, $0) }) { first, _ in first }
        var days = Days()
        try c.forEachRow(
            "SELECT funnel, cohort_day::text, time_zone, tally FROM funnel_tallies WHERE \(filter)", parameters
        ) { row in
            let name = try row.decode(String.self, at: 0)
            guard let funnel = byName[name], !days.inconsistent.contains(name) else { return }
            let bytes = try row.decode(PostgresBytes.self, at: 3).bytes
            guard try row.decode(String.self, at: 2) == timeZones[name], bytes.first == TallyEncoding.version else {
                days.inconsistent.insert(name)
                days.tallies[name] = nil
                return
            }
            days.tallies[name, default: [:]][try row.decode(String.self, at: 1)] = try TallyEncoding.decode(bytes, funnel: funnel)
        }
        return days
    }
}
