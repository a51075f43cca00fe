import Foundation
public import Funnels
public import LibPQ

/// Builds the reports `onramp report` renders from the stored per-person
/// outcomes (not from the log), for a range of cohort days.
public struct ReportQuery: Sendable {
    public var from: String?
    public var to: String?
    public var funnels: [String]
    public var timeZoneOverride: String?

    public init(from: String? = nil, to: String? = nil, funnels: [String] = [], timeZoneOverride: String? = nil) {
        self.from = from
        self.to = to
        self.funnels = funnels
        self.timeZoneOverride = timeZoneOverride
    }

    /// A funnel's report plus the completers' times, in no particular order (the dashboard's distribution chart).
    public struct FunnelResult: Sendable {
        public var report: FunnelReport
        public var secondsToComplete: [Double]
    }

    /// One result per selected funnel, in configuration order: each
    /// funnel's stored days in the range, read for all of them at once, added
    /// up, and the report built from them.
    public func results(_ c: Connection, configuration: FunnelConfiguration, now: Int64) throws -> [FunnelResult] {
        try results(c, configuration: configuration, now: now, analyses: PersonAnalyses.standard(configuration.funnels))
    }

    /// `results`, with each of `analyses` filling its part of the reports.
    func results(_ c: Connection, configuration: FunnelConfiguration, now: Int64, analyses: [any PersonAnalysis]) throws -> [FunnelResult] {
        let selected = try selectedFunnels(configuration)
        let stored = try StoredReportDays.read(
            c, funnels: selected, analyses: analyses, timeZones: zoneNames(selected, configuration), from: from, to: to)
        // What each report is made of is read on `c`, then worked out, one
        // funnel after another: two at a time saved under 5 % of a night at
        // 10 M (BENCHMARKS.md, "What runs concurrently").
        let tables = analyses.map(\.table)
        var results = try selected.map { funnel in
            result(
                try input(c, funnel: funnel, configuration: configuration, now: now, analyses: analyses,
                          stored: stored[funnel.name] ?? StoredReportDays(tallies: [:])),
                analyses: tables, now: now)
        }
        // One night's alerts, tested together (docs/funnels.md, "Regressions and alerts").
        let together = Regressions.acrossReport(results.map(\.report.regressions), settings: selected.map(\.alerts))
        for index in results.indices { results[index].report.regressions = together[index] }
        try checkInstrumentation(c, &results, funnels: selected, now: now)
        let frozen = try FrozenDays.read(c, funnels: configuration.funnels)
        if let before = frozen.before {
            let earlier = Set(try c.query("SELECT funnel FROM funnel_frozen_definitions").rows.map { try $0.decode(String.self, at: 0) })
            for index in results.indices where from.map({ $0 < before }) ?? true {
                let funnel = results[index].report.funnel
                results[index].report.frozen = FrozenDaysNote(before: before, earlierDefinition: earlier.contains(funnel))
            }
        }
        return results
    }

    /// Each report's instrumentation findings from the event catalogue, at
    /// the versions its regressions compare, and the regressions they
    /// likely explain labelled (docs/tracking-health.md).
    private func checkInstrumentation(_ c: Connection, _ results: inout [FunnelResult], funnels: [Funnel], now: Int64) throws {
        var catalogs: [String: EventCatalogCounts] = [:]
        for (index, funnel) in zip(results.indices, funnels) {
            let zone = TimeZone(identifier: results[index].report.timeZone) ?? .gmt
            var newest = CohortCalendar.text(ofDay: CohortCalendar.dayNumber(of: now, in: zone) - 1)
            if let to, to < newest { newest = to }
            let recentFrom = CohortCalendar.dayNumber(ofText: newest).map {
                CohortCalendar.text(ofDay: $0 - Int64(InstrumentationCheck.unmatchedDays) + 1)
            }
            let key = "\(funnel.app)\u{1F}\(newest)"
            if catalogs[key] == nil {
                catalogs[key] = try EventCatalogRead.counts(c, app: funnel.app, from: from, through: newest, recentFrom: recentFrom)
            }
            let version = results[index].report.regressions.tested.first { $0.kind == .version }
            let findings = InstrumentationCheck.findings(
                funnel: funnel, catalog: catalogs[key] ?? EventCatalogCounts(),
                versions: version.map { (older: $0.baseline.label, newest: $0.recent.label) }, newestClosedDay: newest,
                minPersons: funnel.alerts.minPersons)
            results[index].report.instrumentation = findings
            InstrumentationCheck.label(&results[index].report.regressions, with: findings)
        }
    }

    /// The time zone each of `funnels` is reported in.
    private func zoneNames(_ funnels: [Funnel], _ configuration: FunnelConfiguration) -> [String: String] {
        Dictionary(funnels.map { ($0.name, timeZoneOverride ?? configuration.timeZoneIdentifier(for: $0)) }) { first, _ in first }
    }

    /// The funnels the query names (all when none), or a configuration error naming the unknown one.
    func selectedFunnels(_ configuration: FunnelConfiguration) throws -> [Funnel] {
        funnels.isEmpty ? configuration.funnels : try funnels.map { name in
            guard let funnel = configuration.funnel(named: name) else {
                let known = configuration.funnels.map(\.name).joined(separator: ", ")
                throw ProjectionError(code: .badConfiguration, description: "no funnel named '\(name)' (configured: \(known))")
            }
            return funnel
        }
    }

    /// What one funnel's report is made of: its days' tallies and each
    /// analysis's part.
    private struct Input: Sendable {
        let funnel: Funnel
        let zoneName: String
        let days: [String: FunnelTally]
        /// Analysis (by its table) -> its part.
        let parts: [String: any ReportPart]
    }

    /// One funnel's `stored` days, or, when those were cut in another zone,
    /// its stored persons whose start falls in the range there, read on `c`.
    private func input(
        _ c: Connection, funnel: Funnel, configuration: FunnelConfiguration, now: Int64, analyses: [any PersonAnalysis],
        stored: StoredReportDays
    ) throws -> Input {
        let zoneName = timeZoneOverride ?? configuration.timeZoneIdentifier(for: funnel)
        if let tallies = stored.tallies { return Input(funnel: funnel, zoneName: zoneName, days: tallies, parts: stored.parts) }
        let days = try outcomeTallies(c, funnel: funnel, zone: TimeZone(identifier: zoneName) ?? .gmt)
        var parts: [String: any ReportPart] = [:]
        for analysis in analyses {
            parts[analysis.table] = try analysis.recountedReportPart(
                c, funnel: funnel, range: CohortRange(from: from, to: to, timeZone: zoneName), now: now)
        }
        return Input(funnel: funnel, zoneName: zoneName, days: days, parts: parts)
    }

    /// One funnel's result from what it is made of, each analysis (by its
    /// table, in `analyses`' order) filling its part.
    private func result(_ input: Input, analyses: [String], now: Int64) -> FunnelResult {
        let funnel = input.funnel, zone = TimeZone(identifier: input.zoneName) ?? .gmt
        let tally = FunnelTally.total(of: input.days.values, funnel: funnel)
        var report = FunnelReport(funnel: funnel, tally: tally, now: now, timeZone: zone)
        report.regressions = Regressions.find(funnel: funnel, days: input.days, now: now, timeZone: zone, to: to)
        for table in analyses { input.parts[table]?.fill(&report, tally: tally) }
        report.timeZone = input.zoneName  // as configured ("UTC"; Foundation on Linux would say "GMT")
        return FunnelResult(report: report, secondsToComplete: tally.durations.map { Double($0) / 1_000_000 })
    }

    /// The slow way, from every stored person: when the stored tallies were
    /// cut in another time zone than this report's (`--time-zone`).
    private func outcomeTallies(_ c: Connection, funnel: Funnel, zone: TimeZone) throws -> [String: FunnelTally] {
        var days: [String: FunnelTally] = [:]
        let shape = FunnelTally.Shape(funnel)
        try OutcomeStore.forEach(c, funnel: funnel, days: nil) { stored in
            guard let start = stored.outcome.startTime else { return }
            let day = CohortCalendar.day(of: start, in: zone)
            if let from, day < from { return }
            if let to, day > to { return }
            days[day, default: FunnelTally(funnel: funnel)].add(stored.outcome, shape: shape, cohortDay: day, timeZone: zone)
        }
        return days
    }
}
