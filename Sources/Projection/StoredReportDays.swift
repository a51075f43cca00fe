import Funnels
import LibPQ

/// What a report adds up of one funnel's stored cohort days, by day: the
/// day tallies, the drop-off counts and the retention cells.
///
/// The nightly run has them read on its reader, under its snapshot, once it
/// reads no more of the log there and while its own session rewrites the
/// days that changed; after the commit the report reads only those days
/// again (`ReportQuery.results(…, stored:rewritten:)`), where it read every
/// day of every funnel once the run had ended.
struct StoredReportDays: Sendable {
    /// Nil when a day's tally was cut in another time zone than the
    /// report's, or stored before the per-version counts: then only the
    /// persons' outcomes can answer (`TallyStore.days`).
    var tallies: [String: FunnelTally]?
    var dropOff: [String: DropOffCounts] = [:]
    var retention: [String: [RetentionCell]] = [:]
    /// The tallies' lists, sorted across the days (`sortingLists`), and kept
    /// so when days are replaced: the report's sort of them is then a merge.
    var lists: TallyLists?

    /// The SQL picking cohort days `from...to` ($2, $3; either end open).
    static let range = "($2::date IS NULL OR cohort_day >= $2::date) AND ($3::date IS NULL OR cohort_day <= $3::date)"

    /// `funnel`'s stored days in `from...to` (either end open), its tallies
    /// cut in `timeZone`.
    static func read(_ c: Connection, funnel: Funnel, from: String?, to: String?, timeZone: String) throws -> StoredReportDays {
        try read(c, funnels: [funnel], timeZones: [funnel.name: timeZone], where: "funnel = $1 AND \(range)", [
            .text(funnel.name), .optional(from), .optional(to),
        ])[funnel.name] ?? StoredReportDays(tallies: [:])
    }

    /// The stored days in `from...to` (either end open) of each of
    /// `funnels`, by funnel, its tallies cut in its `timeZones` zone.
    static func read(
        _ c: Connection, funnels: [Funnel], timeZones: [String: String], from: String?, to: String?
    ) throws -> [String: StoredReportDays] {
        try read(c, funnels: funnels, timeZones: timeZones, where: "funnel = ANY($1::text[]) AND \(range)", [
            .textArray(funnels.map(\.name)), .optional(from), .optional(to),
        ])
    }

    /// The stored `days` of each of `funnels`, by funnel, its tallies cut
    /// in its `timeZones` zone.
    static func read(
        _ c: Connection, funnels: [Funnel], timeZones: [String: String], days: [FunnelDay]
    ) throws -> [String: StoredReportDays] {
        try read(c, funnels: funnels, timeZones: timeZones, where: FunnelDay.anyOf, FunnelDay.parameters(days))
    }

    /// The days `filter` picks (SQL on `funnel` and `cohort_day`, its
    /// parameters from $1) of each of `funnels`: one statement per day
    /// table for them all, where a statement per funnel and table had been
    /// 35 round trips for the 1 M bench's seven funnels.
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

    /// These days with their tallies' lists sorted across the days, for a
    /// report that will replace a few of them (`replacing`).
    func sortingLists() -> StoredReportDays {
        guard let tallies else { return self }
        var lists = TallyLists()
        for tally in tallies.values { lists.add(tally) }
        lists.sort()
        var sorted = self
        sorted.lists = lists
        return sorted
    }

    /// These days with `days` as `fresh` holds them, read after they were
    /// rewritten: a day `fresh` lacks has no rows any more.
    func replacing(_ days: [String], with fresh: StoredReportDays) -> StoredReportDays {
        guard let tallies, let freshTallies = fresh.tallies else { return StoredReportDays(tallies: nil) }
        var replaced = self
        // The old days' values taken out of the sorted lists in one pass,
        // the new ones appended: a few short runs after one long one.
        var removed = TallyLists()
        for day in days { if let old = tallies[day] { removed.add(old) } }
        replaced.lists?.remove(removed)
        for day in days {
            if let new = freshTallies[day] { replaced.lists?.add(new) }
            replaced.tallies?[day] = freshTallies[day]
            replaced.dropOff[day] = fresh.dropOff[day]
            replaced.retention[day] = fresh.retention[day]
        }
        return replaced
    }
}
