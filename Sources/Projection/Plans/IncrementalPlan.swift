import Foundation
import Funnels
import LibPQ
import LogReading

/// Only what changed since the last run's snapshot: the persons the new
/// events touch, with all their events however old, and the cohort days
/// their old and new outcomes and the windows closed since fall on.
struct IncrementalPlan: ProjectionPlan {
    var mode: ProjectionJob.Mode { .incremental }
    var windowsClosed: Int { start.windowsClosed }
    /// For sizing partitions only; a wrong guess costs a little speed.
    static let eventsPerPersonEstimate = 20

    /// The new events: written since the last run, up to this one's snapshot.
    let window: LogWindow
    private var start = IncrementalStart()
    /// The histories, then, on a second session, what the touched persons'
    /// rows counted per analysis (nil: read before the deletes, on the one session).
    private var prefetch: HistoryPrefetch<[String: [FunnelDay: any AnalysisTally]]?>?
    /// Analysis (by its table) -> its change, read before the stored outcomes are removed.
    private var dayChanges: [String: StoredDayChange] = [:]
    /// The days the archive made final, as the run read them (`FrozenDays`).
    private(set) var frozen: FrozenDays

    init(window: LogWindow, frozen: FrozenDays) {
        self.window = window
        self.frozen = frozen
    }

    /// Relinks, collects the touched persons, starts streaming their
    /// histories on the reader, and meanwhile deletes their stored outcomes
    /// (and every analysis's rows of them) and closes the windows that closed.
    mutating func prepare(_ run: ProjectionRun) throws -> Reading {
        let c = run.session
        let outcomeEvents = Dictionary(uniqueKeysWithValues: run.apps.map { app in
            (app, OutcomeEvents(funnels: run.configuration.funnels(forApp: app), audiences: run.configuration.audiences(forApp: app)))
        })
        var day = try NewEvents.read(c, outcomeEvents: outcomeEvents, window: window)
        let erased = try ErasedPersons.pending(c, apps: run.apps)
        day.users.formUnion(erased)
        day.erasedApps = Set(erased.map(\.app))
        let clocked = try AudienceBreakdownChanges.units(c, funnels: run.configuration.funnels, now: run.now)
        day.users.formUnion(clocked.persons)
        day.clockedGroups = clocked.groups
        let windows = Dictionary(run.configuration.funnels.map { ($0.name, $0.windowMicroseconds) }) { first, _ in first }
        let lookup = try PersonActivity.Lookup(
            c, windows: windows, activityDays: run.analyses.reduce(into: Set()) { $0.formUnion($1.activityDays) },
            activitySpan: day.activitySpan, scanShare: run.options.lookupScanShare, dialect: run.dialect)
        start = try IncrementalStart.collect(
            c, day: day, groupFunnels: run.configuration.funnels.filter { $0.aggregateBy == .group }, lookup: lookup,
            reader: run.reader, lane: run.readerLane)
        try frozen.loadPersons(c, from: OutcomeStore.touched(run.dialect))
        // Partitions are sized from the persons (a few dozen events each), as
        // counting their events costs as much as reading them.
        let partitions = start.personCount * Self.eventsPerPersonEstimate / max(1, run.options.eventsPerPartition) + 1
        let readers = readers(run, sizes: day.counts)
        // What the touched persons' rows counted is read on the reader after
        // their histories, while this session deletes them: it sees them as
        // the run found them. On this session, the deletes and these reads
        // together would outlast the histories on the reader.
        let analyses = run.analyses, secondSession = run.reader !== c, dialect = run.dialect
        let prefetch = HistoryPrefetch(
            readers, identities: start.identities, on: run.reader, lane: run.readerLane, partitions: partitions,
            spillBuffer: run.options.spillBuffer
        ) { reader -> [String: [FunnelDay: any AnalysisTally]]? in
            guard secondSession else { return nil }
            return try Dictionary(analyses.map { ($0.table, try $0.touchedDayParts(reader, dialect: dialect)) }) { first, _ in first }
        }
        run.onClose { prefetch.close() }
        self.prefetch = prefetch
        for analysis in run.analyses {
            dayChanges[analysis.table] = try analysis.storedDayChange(c, now: run.now, activity: start.activity, dialect: run.dialect)
            if !secondSession {
                dayChanges[analysis.table]?.removed = frozen.unfrozen(try analysis.touchedDayParts(c, dialect: run.dialect))
            }
        }
        let hadOutcomes = try start.removeStoredOutcomes(
            c, funnels: run.configuration.funnels, now: run.now, timeZone: run.timeZone(for:), frozen: frozen, dialect: run.dialect)
        for analysis in run.analyses { try analysis.deleteRecomputed(c, hadOutcomes: hadOutcomes, frozen: frozen, dialect: run.dialect) }
        if !run.configuration.audiences.isEmpty { try AudienceSpanStore.deleteTouched(c, dialect: run.dialect) }
        return Reading(readers: readers, newEvents: day.counts, partitions: partitions, expectedEvents: nil)
    }

    func persons(of app: String) -> Set<String>? { start.touched[app] ?? [] }

    mutating func history(of reader: PersonHistoryReader, _ run: ProjectionRun) throws -> SpilledHistory {
        guard let prefetch else {
            throw ProjectionError(code: .spill, description: "the incremental run read a history before it was prepared")
        }
        return try prefetch.next()
    }

    /// Takes what the reader read of the touched persons' rows after their histories.
    mutating func finishEvaluation(_ run: ProjectionRun) throws {
        guard let prefetch, let parts = try prefetch.afterwards() else { return }
        for (analysis, removed) in parts { dayChanges[analysis, default: StoredDayChange()].removed = frozen.unfrozen(removed) }
    }

    func cohortDays(evaluated: Set<FunnelDay>) -> Set<FunnelDay> { start.affected.union(evaluated).filter { !frozen.isFrozen($0.day) } }

    func storedDayChange(of analysis: any PersonAnalysis) -> StoredDayChange? { dayChanges[analysis.table] ?? StoredDayChange() }

    func storedTallies(_ run: ProjectionRun, days: Set<FunnelDay>) throws -> [String: [String: TallyStore.Stored]] {
        try TallyStore.load(run.session, funnels: run.configuration.funnels, days: days)
    }

    /// Each day's stored tally, less the outcomes deleted or closed, plus the
    /// ones counted and the closed ones as they are now.
    func tallies(
        _ run: ProjectionRun, funnel: Funnel, days: Set<String>, counted: [String: FunnelTally], stored: [String: TallyStore.Stored]
    ) throws -> [String: FunnelTally] {
        var added = counted
        for (day, tally) in start.closed[funnel.name] ?? [:] { added[day, default: FunnelTally(funnel: funnel)].merge(tally) }
        return try CohortTables.replacing(
            run.session, funnel: funnel, days: days, stored: stored, removed: start.removed[funnel.name] ?? [:], added: added,
            untallied: start.untallied[funnel.name] ?? [], timeZone: run.timeZone(for: funnel),
            timeZoneName: run.timeZoneName(for: funnel))
    }
}

/// What an incremental run settles before it evaluates anyone: whom to
/// recompute (before any history is read), and which stored outcomes leave
/// the days' tallies — the touched persons' (deleted, to be recomputed) and
/// those whose window closed with no new events (closed in place). The
/// incremental plan's state; a rebuild has none of it.
struct IncrementalStart: Sendable {
    /// App -> the persons to recompute.
    var touched: [String: Set<String>] = [:]
    /// By app, the person an id's events belong to, where not itself, and
    /// the groups to recompute of each member: what the history reads give
    /// events to (`TouchedPersons`).
    var identities: [String: PersonHistoryReader.Identities] = [:]
    /// Persons with new events, all activity, who are not recomputed.
    var activity: [PersonActivity] = []
    /// Funnel days whose tables change before any person is recomputed.
    var affected = Set<FunnelDay>()
    /// Funnel -> cohort day -> tally of the outcomes deleted or closed, as they were stored.
    var removed: [String: [String: FunnelTally]] = [:]
    /// Funnel -> cohort day -> tally of the outcomes closed in place, as they are now.
    var closed: [String: [String: FunnelTally]] = [:]
    var windowsClosed = 0
    /// Funnel -> cohort days stored before there were tallies (migration 005).
    var untallied: [String: Set<String>] = [:]

    var personCount: Int { touched.values.reduce(0) { $0 + $1.count } }

    /// Updates the links from the day's events and collects the touched
    /// persons (and groups, of `groupFunnels`, those counting them), with
    /// their keys on `reader`: enough to start reading their histories.
    /// Meanwhile the reader looks up the stored outcomes of the day's active
    /// keys (`NewEvents.activityKeys`).
    static func collect(
        _ c: Connection, day: NewEvents, groupFunnels: [Funnel], lookup: PersonActivity.Lookup, reader: Connection,
        lane: Background
    ) throws -> IncrementalStart {
        var start = IncrementalStart()
        let prefetch = reader === c ? nil : PersonActivity.prefetch(on: reader, lane: lane, of: day.activityKeys, lookup: lookup)
        // Whatever happens below, the reader is not used again until the lookup is over.
        defer { _ = try? prefetch?.wait() }
        // Every relink is needed up front to know whom to recompute.
        let relinks = try IdentityLinker.update(
            c, newLinks: day.links, byScan: lookup.byScan(links: day.links.values.reduce(0) { $0 + $1.count }), dialect: lookup.dialect)
        (start.touched, start.identities, start.activity) = try TouchedPersons.collect(
            c, day: day, relinks: relinks, groupFunnels: groupFunnels, lookup: lookup, reader: reader, prefetched: prefetch)
        return start
    }

    /// Deletes the touched persons' outcomes and closes the windows that
    /// closed since the last run, while their histories are read on the
    /// other session; `timeZone` is the job's zone for a funnel's cohort days.
    /// Returns the touched persons who had stored outcomes.
    mutating func removeStoredOutcomes(
        _ c: Connection, funnels configured: [Funnel], now: Int64, timeZone: (Funnel) -> TimeZone, frozen: FrozenDays,
        dialect: SQLDialect
    ) throws -> [NewEvents.Key] {
        let funnels = Dictionary(configured.map { ($0.name, $0) }) { first, _ in first }
        let shapes = funnels.mapValues(FunnelTally.Shape.init)
        func tally(_ tallies: inout [String: [String: FunnelTally]], _ name: String, _ cohortDay: String, _ outcome: PersonOutcome) {
            guard let funnel = funnels[name], let shape = shapes[name] else { return }  // no longer configured
            tallies[name, default: [:]][cohortDay, default: FunnelTally(funnel: funnel)]
                .add(outcome, shape: shape, cohortDay: cohortDay, timeZone: timeZone(funnel))
        }
        let hadOutcomes = try OutcomeStore.deleteTouched(c, dialect: dialect, frozen: frozen) { name, cohortDay, outcome in
            affected.insert(FunnelDay(funnel: name, day: cohortDay))
            tally(&removed, name, cohortDay, outcome)
        }
        try OutcomeStore.closeWindows(c, now: now) { name, cohortDay, outcome in
            affected.insert(FunnelDay(funnel: name, day: cohortDay))
            windowsClosed += 1
            // A completer was counted as completed already: only the
            // analyses' day tables change (`PersonAnalysis.storedDayChange`).
            guard !outcome.completed else { return }
            var open = outcome
            open.inProgress = true
            tally(&removed, name, cohortDay, open)
            tally(&closed, name, cohortDay, outcome)
        }
        // Open windows, and days stored before there were tallies.
        for row in try c.query(
            """
            SELECT funnel, cohort_day::text, NOT EXISTS (
                SELECT 1 FROM funnel_tallies t WHERE t.funnel = c.funnel AND t.cohort_day = c.cohort_day)
            FROM funnel_cohorts c
            WHERE in_progress
               OR NOT EXISTS (SELECT 1 FROM funnel_tallies t WHERE t.funnel = c.funnel AND t.cohort_day = c.cohort_day)
            """
        ).rows {
            let funnelDay = FunnelDay(funnel: try row.decode(String.self, at: 0), day: try row.decode(String.self, at: 1))
            affected.insert(funnelDay)
            if try row.decode(Bool.self, at: 2) { untallied[funnelDay.funnel, default: []].insert(funnelDay.day) }
        }
        return hadOutcomes
    }
}
