import Funnels
import LibPQ

/// What a report adds up of one funnel's stored cohort days, by day: the
/// day tallies, the drop-off counts and the retention cells.
struct StoredReportDays: Sendable {
    /// Nil when a day's tally was cut in another time zone than the
    /// report's, or stored before the per-version counts: then only the
    /// persons' outcomes can answer (`TallyStore.days`).
    var tallies: [String: FunnelTally]?
    var dropOff: [String: DropOffCounts] = [:]
    var retention: [String: [RetentionCell]] = [:]

    /// The SQL picking cohort days `from...to` ($2, $3; either end open).
    static let range = "($2::date IS NULL OR cohort_day >= $2::date) AND ($3::date IS NULL OR cohort_day <= $3::date)"

    /// The stored days in `from...to` (either end open) of each of
    /// `funnels`, by funnel, its tallies cut in its `timeZones` zone.
    static func read(
        _ c: Connection, funnels: [Funnel], timeZones: [String: String], from: String?, to: String?
    ) throws -> [String: StoredReportDays] {
        try read(c, funnels: funnels, timeZones: timeZones, where: "funnel = ANY($1::text[]) AND \(range)", [
            .textArray(funnels.map(\.name)), .optional(from), .optional(to),
        ])
    }

    /// The days `filter` picks (SQL on `funnel` and `cohort_day`, its
    /// parameters from $1) of each of `funnels`: one statement per day
    /// table for them all.
    private static func read(
        _ c: Connection, funnels: [Funnel], timeZones: [String: String], where filter: String, _ parameters: [PostgresValue]
    ) throws -> [String: StoredReportDays] {
        let tallies = try TallyStore.days(c, funnels: funnels, timeZones: timeZones, where: filter, parameters)
        let dropOff = try DropOffAnalysis.stored(c, funnels: funnels, where: filter, parameters)
        let retention = try RetentionQuery.cells(c, where: filter, parameters)
        var read: [String: StoredReportDays] = [:]
        for funnel in funnels {
            read[funnel.name] = tallies.inconsistent.contains(funnel.name) ? StoredReportDays(tallies: nil) : StoredReportDays(
                tallies: tallies.tallies[funnel.name] ?? [:], dropOff: dropOff[funnel.name] ?? [:], retention: retention[funnel.name] ?? [:])
        }
        return read
    }
}
