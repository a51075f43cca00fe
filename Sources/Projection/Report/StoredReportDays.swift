import Funnels
import LibPQ

/// What a report adds up of one funnel's stored cohort days: the day
/// tallies, and each analysis's part of the report.
struct StoredReportDays: Sendable {
    /// Nil when a day's tally was cut in another time zone than the
    /// report's, or stored before the per-version counts: then only the
    /// persons' outcomes can answer (`TallyStore.days`).
    var tallies: [String: FunnelTally]?
    /// Analysis (by its table) -> its part of the report.
    var parts: [String: any ReportPart] = [:]

    /// The SQL picking cohort days `from...to` ($2, $3; either end open).
    static let range = "($2::date IS NULL OR cohort_day >= $2::date) AND ($3::date IS NULL OR cohort_day <= $3::date)"

    /// The stored days in `from...to` (either end open) of each of
    /// `funnels`, by funnel, its tallies cut in its `timeZones` zone: one
    /// statement per day table for them all.
    static func read(
        _ c: Connection, funnels: [Funnel], analyses: [any PersonAnalysis], timeZones: [String: String], from: String?, to: String?
    ) throws -> [String: StoredReportDays] {
        let filter = "funnel = ANY($1::text[]) AND \(range)"
        let parameters: [PostgresValue] = [.textArray(funnels.map(\.name)), .optional(from), .optional(to)]
        let tallies = try TallyStore.days(c, funnels: funnels, timeZones: timeZones, where: filter, parameters)
        let parts = try Dictionary(analyses.map { ($0.table, try $0.reportParts(c, funnels: funnels, where: filter, parameters)) }) { first, _ in first }
        var read: [String: StoredReportDays] = [:]
        for funnel in funnels {
            read[funnel.name] = tallies.inconsistent.contains(funnel.name) ? StoredReportDays(tallies: nil) : StoredReportDays(
                tallies: tallies.tallies[funnel.name] ?? [:], parts: parts.compactMapValues { $0[funnel.name] })
        }
        return read
    }
}
