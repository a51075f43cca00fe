import Dispatch
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

    /// A funnel's report plus the completers' times (the dashboard's distribution chart).
    public struct FunnelResult: Sendable {
        public var report: FunnelReport
        public var secondsToComplete: [Double]
    }

    /// One result per selected funnel, in configuration order. With `second`,
    /// another session on the same database, the funnels are shared out
    /// between the two and worked on side by side: a funnel's report is
    /// partly reads and partly decoding and statistics on this side, and on
    /// one session one of the two always waits for the other.
    public func results(
        _ c: Connection, beside second: Connection? = nil, configuration: FunnelConfiguration, now: Int64
    ) throws -> [FunnelResult] {
        try results(c, beside: second, configuration: configuration, now: now, stored: nil, rewritten: [:])
    }

    /// `results`, from `stored`, each funnel's days as they stood before the
    /// nightly run that just committed (`storedDays`, read under its
    /// snapshot), when given, with the days that run rewrote as read again
    /// after it (`rewrittenDays`).
    func results(
        _ c: Connection, beside second: Connection?, configuration: FunnelConfiguration, now: Int64,
        stored: [String: StoredReportDays]?, rewritten: [String: RewrittenDays]
    ) throws -> [FunnelResult] {
        let selected = try selectedFunnels(configuration)
        @Sendable func result(_ c: Connection, _ funnel: Funnel) throws -> FunnelResult {
            let prefetched = stored?[funnel.name].map { days in
                rewritten[funnel.name].map { days.replacing($0.days, with: $0.read) } ?? days
            }
            return try self.result(c, funnel: funnel, configuration: configuration, now: now, prefetched: prefetched)
        }
        guard let second, second !== c, selected.count > 1 else {
            return try selected.map { try result(c, $0) }
        }
        // Each session takes the next funnel as it is free: handed out in
        // turn, the 1 M bench's three of five on one session took twice as
        // long as the other's two.
        let sessions = [c, second]
        let work = SharedWork<FunnelResult>(count: selected.count)
        DispatchQueue.concurrentPerform(iterations: sessions.count) { side in
            work.work { try result(sessions[side], selected[$0]) }
        }
        // A slot is empty only when every side stopped at a failure before it, which is thrown first.
        return try work.results.compactMap { try $0?.get() }
    }

    /// Each selected funnel's stored days in the range, as `c` sees them
    /// (the nightly run's reader, before the run's rewrite), for `results`.
    func storedDays(_ c: Connection, configuration: FunnelConfiguration) throws -> [String: StoredReportDays] {
        let funnels = try selectedFunnels(configuration)
        return try StoredReportDays.read(c, funnels: funnels, timeZones: zoneNames(funnels, configuration), from: from, to: to)
            .mapValues { $0.sortingLists() }
    }

    /// Some of a funnel's cohort days, read after the run that rewrote them committed.
    struct RewrittenDays: Sendable {
        var days: [String]
        var read: StoredReportDays
    }

    /// The cohort days a nightly run `rewritten`, of each selected funnel,
    /// in the range, as `c` sees them after its commit.
    func rewrittenDays(_ c: Connection, configuration: FunnelConfiguration, rewritten: Set<FunnelDay>) throws -> [String: RewrittenDays] {
        let funnels = try selectedFunnels(configuration)
        let names = Set(funnels.map(\.name))
        let days = rewritten.filter { names.contains($0.funnel) && inRange($0.day) }
        guard !days.isEmpty else { return [:] }
        let read = try StoredReportDays.read(c, funnels: funnels, timeZones: zoneNames(funnels, configuration), days: Array(days))
        return Dictionary(grouping: days, by: \.funnel).mapValues { days in
            RewrittenDays(days: days.map(\.day).sorted(), read: read[days[0].funnel] ?? StoredReportDays(tallies: [:]))
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

    private func inRange(_ day: String) -> Bool {
        (from.map { day >= $0 } ?? true) && (to.map { day <= $0 } ?? true)
    }

    /// One funnel's result, read on `c`, or from `prefetched`'s days when given.
    private func result(
        _ c: Connection, funnel: Funnel, configuration: FunnelConfiguration, now: Int64, prefetched: StoredReportDays?
    ) throws -> FunnelResult {
        let zoneName = timeZoneOverride ?? configuration.timeZoneIdentifier(for: funnel)
        let zone = TimeZone(identifier: zoneName) ?? .gmt
        let stored = try prefetched ?? StoredReportDays.read(c, funnel: funnel, from: from, to: to, timeZone: zoneName)
        let days = try stored.tallies ?? outcomeTallies(c, funnel: funnel, zone: zone)
        var tally = FunnelTally(funnel: funnel)
        for day in days.values { tally.merge(day) }
        // Sorted once here rather than by each reader of the lists; from
        // the lists sorted beside the run when there are (a merge of a few runs).
        if let lists = stored.lists { tally.take(lists) }
        tally = tally.normalized()
        var report = FunnelReport(funnel: funnel, tally: tally, now: now, timeZone: zone)
        report.regressions = Regressions.find(funnel: funnel, days: days, now: now, timeZone: zone, to: to)
        // The same persons as the tally: the stored days, or when those were
        // cut in another zone, the persons whose start falls in the range there.
        var counts = DropOffCounts()
        if stored.tallies != nil {
            for day in stored.dropOff.values { counts.merge(day) }
            report.retention = RetentionReport(days: funnel.retention.days, cells: stored.retention)
        } else {
            counts = try DropOffQuery.counts(c, funnel: funnel, from: from, to: to, timeZone: zoneName)
            report.retention = try RetentionQuery.report(c, funnel: funnel, from: from, to: to, timeZone: zoneName, now: now)
        }
        report.diagnostics = DropOffDiagnostics(funnel: funnel, tally: tally, counts: counts)
        report.timeZone = zoneName  // as configured ("UTC"; Foundation on Linux would say "GMT")
        let durations = tally.durations.map { Double($0) / 1_000_000 }
        return FunnelResult(report: report, secondsToComplete: durations)
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
