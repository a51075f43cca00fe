public import Foundation
import EventLog
public import Funnels
public import LibPQ
import LogReading

/// The nightly job (docs/nightly-job.md): folds the log into per-person funnel outcomes and
/// per-cohort-day report rows.
///
/// Incremental runs read only events written by transactions between the last
/// checkpoint and the current horizon, recompute only the persons those events
/// touch (with all their events, however old) plus persons whose window was
/// still open, and rewrite only the cohort days that changed. `rebuild` does the
/// same for everyone from scratch and must give identical tables.
///
/// A run is one REPEATABLE READ transaction (kill it at any point and nothing
/// is half-written), under a session advisory lock taken *before* the snapshot,
/// so a second concurrent run exits instead of writing over the first.
///
/// Its shape: a `ProjectionRun` owns the run's sessions and background work;
/// a `ProjectionPlan` (`RebuildPlan`, `IncrementalPlan`) says what to read,
/// whom to recompute and which cohort days to rewrite; per person, the funnel
/// evaluator's outcomes feed `funnel_persons`, the day tallies and every
/// `PersonAnalysis` in `analyses`.
public struct ProjectionJob: Sendable {
    public enum Mode: String, Sendable { case incremental, rebuild }

    public struct Summary: Sendable, Equatable {
        public var mode: Mode
        public var previousHorizon: Int64
        public var horizon: Int64
        /// Events committed since the last run (the run's new input), of
        /// the apps of the funnels it kept incremental; a rebuild's: every event.
        public var newEvents: Int
        /// Events read to recompute the touched persons.
        public var eventsRead: Int
        public var personsRecomputed: Int
        /// Groups recomputed for the funnels counting groups (`aggregate_by: group`).
        public var groupsRecomputed = 0
        /// Outcomes whose window closed since the last run, closed in place.
        public var windowsClosed: Int
        public var cohortDaysRewritten: Int
        /// The funnels the run recomputed from the whole log because their
        /// definition changed, and those whose rows it removed.
        public var definitions = DefinitionChanges()
        /// Units that entered and left an audience at the run's clock (docs/audiences.md).
        public var audiencesEntered = 0
        public var audiencesLeft = 0
    }

    /// The session advisory lock every run (and an erasure) holds.
    public static let lockKey: Int64 = 0x6f6e_7261_6d70_02

    public let configuration: FunnelConfiguration
    public let showProgress: Bool
    /// Where the run says, before it writes, which funnels it recomputes or
    /// removes and why (`DefinitionChanges.lines`); the CLI's stderr.
    public var announce: (@Sendable (String) -> Void)?
    /// How runs read and evaluate (partition sizes, a second session, threads).
    var options = ProjectionRun.Options()
    /// The per-person analyses after the funnel evaluator, each with its own table.
    var analyses: [any PersonAnalysis]
    /// The analyses' per-person tables (with `app` and `person_id`), besides `funnel_persons`.
    public var personTables: [String] { analyses.map(\.table) }

    /// Cohort days are cut in each funnel's configured zone
    /// (`FunnelConfiguration.timeZoneIdentifier(for:)`), which is part of
    /// what its rows were built from: a report in another zone re-slices
    /// what is stored (`ReportQuery.timeZoneOverride`) and writes no cohort day.
    public init(configuration: FunnelConfiguration, showProgress: Bool = true) {
        self.configuration = configuration
        self.showProgress = showProgress
        analyses = PersonAnalyses.standard(configuration.funnels)
    }

    /// Runs the job on `c` (blocking; call it inside `pool.withConnection`).
    public func run(_ c: Connection, mode: Mode, now: Int64 = Timestamps.microseconds(Date())) throws -> Summary {
        return try Self.locked(c) { try runCommitted(c, mode: mode, now: now) }
    }

    /// The run in a transaction of its own on `c`, holding the job's lock;
    /// then, once it has committed, the statistics it left missing.
    func runCommitted(_ c: Connection, mode: Mode, now: Int64) throws -> Summary {
        var statistics = MissingStatistics()
        let summary = try c.transaction(isolation: .repeatableRead) { c in
            try run(inTransaction: c, mode: mode, now: now, statistics: &statistics)
        }
        try statistics.take(beside: c)
        return summary
    }

    /// Which funnels a run with this configuration would recompute from the
    /// whole log, and why, and which it would remove; writes nothing
    /// (`onramp report --dry-run`).
    public func preview(_ c: Connection) throws -> DefinitionChanges {
        var changes = try DefinitionChanges.compare(c, configuration: configuration, timeZone: configuration.timeZoneIdentifier(for:))
        if !changes.recompute.isEmpty { _ = try changes.countEvents(c) }
        return changes
    }

    /// The run, in its transaction on `c`, holding the job's lock; the
    /// tables it leaves without statistics, to be taken once it commits, in `statistics`.
    private func run(inTransaction c: Connection, mode: Mode, now: Int64, statistics: inout MissingStatistics) throws -> Summary {
        // Once a night, for the run's session and its reader: room for the
        // incremental run's sorts and the rebuild's index builds, which
        // spill to disk at the defaults.
        var settings = "SET LOCAL work_mem = '128MB'; SET LOCAL maintenance_work_mem = '256MB';"
        // The run's commit does not wait for its WAL to reach the disk
        // (much of it first writes to index pages since the last
        // checkpoint, slow to flush). Everything it writes is
        // derived from the log, and its checkpoint commits with it: a
        // server crash that loses the commit loses the checkpoint too, and
        // the next run does the same work again. Ingestion's commits are
        // untouched.
        settings += " SET LOCAL synchronous_commit = off;"
        // No JIT: the run's statements are planned on guessed row counts (a
        // setting's value, a BRIN range, a temporary table) and compiled
        // for them, which took far longer than running them (BENCHMARKS.md).
        settings += " SET LOCAL jit = off;"
        // The incremental run's joins of the day's keys with a whole stored
        // table are meant as hash joins (`PersonActivity.Lookup`); on a
        // temporary table's guessed size the planner takes a merge join
        // instead, sorting all the stored links by text key, several times slower.
        if mode == .incremental { settings += " SET LOCAL enable_mergejoin = off;" }
        try c.executeScript(settings)
        SpilledHistory.removeAbandoned()
        // Where the log lives, read once: the checkpoint, the lookups and the statistics depend on it.
        let layout = try EventLogLayout.read(c)
        let current = try Checkpoint.settled(c, layout: layout)
        let previous = mode == .rebuild ? Checkpoint.start : try Checkpoint.load(c)
        let zone = configuration.timeZoneIdentifier(for:)
        var definitions = try DefinitionChanges.compare(c, configuration: configuration, timeZone: zone)
        let storedAudiences = try AudienceDefinitions.Stored.load(c)
        AudienceDefinitions.widen(&definitions, configuration: configuration, changed: storedAudiences.changed(configuration.audiences))
        let stale = definitions.stale
        // A rebuild computes every funnel from the whole log: it only says which it removes.
        if mode == .rebuild { definitions.recompute = [] }
        let recomputed = Set(definitions.recompute.map(\.funnel))
        let recomputedApps = Set(definitions.recompute.map(\.app))
        // Every funnel new or changed (a first run among them): a rebuild, as cheap and the same tables.
        let rebuildAll = mode == .rebuild || recomputed.count == configuration.funnels.count
        // The catalogue follows the log, not the funnels. What it counts whole
        // is counted on the rebuild's own read of the apps' histories.
        let catalog = EventCatalog(configuration: configuration)
        let erased = try ErasedPersons.apps(c)
        let catalogueWhole = try catalog.begin(c, erased: erased)
        var catalogue: [String: EventCatalog.Counted] = [:]
        func pass(
            _ plan: some ProjectionPlan, _ funnels: [Funnel], counting: ProjectionRun.CatalogueCount? = nil
        ) throws -> Summary {
            try self.pass(
                c, plan: plan, funnels: funnels, from: previous, to: current, layout: layout, settings: settings, now: now,
                catalogue: counting, counted: &catalogue)
        }
        let counted = definitions.recompute.isEmpty ? nil : try definitions.countEvents(c)
        announce(definitions)
        // A rebuild empties the other tables itself; the regressions found
        // under a stale definition go either way (the report writes them again).
        // A funnel no longer configured goes whole; a changed one keeps its
        // frozen days, computed under its old definition (`FrozenDays`).
        let frozen = try FrozenDays.read(c, funnels: configuration.funnels)
        let changed = stale.filter { !definitions.removed.contains($0) }
        try DefinitionChanges.recordFrozen(c, changed: changed, frozen: frozen)
        let tables = DefinitionChanges.funnelTables(analyses: analyses)
        try DefinitionChanges.removeRows(
            c, of: definitions.removed, from: rebuildAll && frozen.before == nil ? ["funnel_regressions"] : tables)
        try DefinitionChanges.removeRows(c, of: changed, from: rebuildAll ? ["funnel_regressions"] : tables, keeping: frozen)
        var summary: Summary
        if rebuildAll {
            summary = try pass(
                RebuildPlan(counted: counted, frozen: frozen), configuration.funnels,
                counting: .init(catalog: catalog, whole: catalogueWhole.whole, snapshot: layout == .distributed ? current : nil))
            statistics = try MissingStatistics.find(c, tables: sampled(layout: layout))
        } else {
            summary = try pass(
                IncrementalPlan(window: LogWindow(from: previous, to: current), frozen: frozen),
                configuration.funnels.filter { !recomputed.contains($0.name) })
            if !recomputed.isEmpty {
                let recompute = try pass(
                    RebuildPlan(only: recomputed, counted: counted, frozen: frozen), configuration.funnels.filter { recomputed.contains($0.name) })
                summary.eventsRead += recompute.eventsRead
                summary.personsRecomputed += recompute.personsRecomputed
                summary.groupsRecomputed += recompute.groupsRecomputed
                summary.cohortDaysRewritten += recompute.cohortDaysRewritten
            }
        }
        // What no tally counted; a rebuild adds what came since the last run too.
        try catalog.finish(
            c, catalogueWhole, counted: catalogue, window: LogWindow(from: mode == .rebuild ? try Checkpoint.load(c) : previous, to: current),
            layout: layout)
        // Who entered and left each audience, now that every unit evaluated has its spans.
        let audiences = try AudienceMembership.update(
            c, audiences: configuration.audiences, stored: storedAudiences,
            whole: Set(configuration.audiences.filter { rebuildAll || recomputedApps.contains($0.app) }.map(\.name)),
            touched: !rebuildAll, now: now)
        try AudienceDefinitions.record(c, configuration: configuration, now: now)
        try TargetTable.write(c, configuration: configuration)
        try TrackingPlanTable.write(c, configuration: configuration)
        try DefinitionChanges.record(
            c, configuration: configuration, timeZone: zone,
            built: rebuildAll ? Set(configuration.funnels.map(\.name)) : recomputed, now: now)
        try ErasedPersons.forget(c)
        try current.save(c, clock: now)
        summary.mode = mode
        summary.definitions = definitions
        summary.audiencesEntered = audiences.entered
        summary.audiencesLeft = audiences.left
        return summary
    }

    /// The tables a rebuild samples when they have no statistics
    /// (`MissingStatistics`). The per-person tables only on the columns
    /// the next night's lookups filter on: their arrays and breakdowns cost
    /// most of the sampling and are never filtered on.
    private func sampled(layout: EventLogLayout) -> [(table: String, columns: String)] {
        let perPerson = [(table: "funnel_persons", columns: "(app, person_id, funnel, cohort_day, in_progress, open_until)")]
            + personTables.map { (table: $0, columns: "(app, person_id, funnel)") }
        let days = DefinitionChanges.funnelTables(analyses: analyses).filter {
            $0 != "funnel_regressions" && $0 != "funnel_persons" && !personTables.contains($0)
        }.map { (table: $0, columns: "") }
        // On Citus the links and the per-person tables are planned on the
        // nodes that hold them, on statistics their autovacuum keeps; an
        // ANALYZE of them here, after the run wrote the coordinator's copy
        // of the links, is refused.
        return (layout == .distributed ? [] : [(table: "identity_links", columns: "")] + perPerson) + days
    }

    /// Says what the run recomputes and removes, before it writes.
    private func announce(_ definitions: DefinitionChanges) {
        guard let announce else { return }
        for line in definitions.lines() { announce(line) }
    }

    /// One pass of a run over `funnels`, in its transaction on `c`: an
    /// incremental run whose definitions changed makes two, the unchanged
    /// funnels' and the recomputed ones'.
    private func pass(
        _ c: Connection, plan: some ProjectionPlan, funnels: [Funnel], from previous: Checkpoint, to current: Checkpoint,
        layout: EventLogLayout, settings: String, now: Int64, catalogue: ProjectionRun.CatalogueCount?,
        counted: inout [String: EventCatalog.Counted]
    ) throws -> Summary {
        var plan = plan
        var scoped = configuration
        scoped.funnels = funnels
        // An app's audiences are kept by the pass that evaluates all its funnels (`AudienceDefinitions`).
        let passed = Set(funnels.map(\.name))
        scoped.audiences = configuration.audiences.filter { audience in
            configuration.funnels(forApp: audience.app).allSatisfy { passed.contains($0.name) }
        }
        return try ProjectionRun.with(
            self, configuration: scoped, session: c, dialect: SQLDialect(layout), settings: settings, now: now, catalogue: catalogue
        ) { run in
            let summary = try project(run, plan: &plan, from: previous, to: current)
            counted.merge(run.cataloguesCounted) { $1 }
            return summary
        }
    }

    /// Runs `body` holding the job's lock on `c`'s session, or throws
    /// `busy` when another session holds it. Taken again by the session that
    /// holds it, it is held until the outermost `locked` ends.
    static func locked<T>(_ c: Connection, _ body: () throws -> T) throws -> T {
        guard try c.query("SELECT pg_try_advisory_lock($1)", [.int(lockKey)]).scalar(Bool.self) else {
            throw ProjectionError.busy
        }
        defer { _ = try? c.query("SELECT pg_advisory_unlock($1)", [.int(lockKey)]) }
        return try body()
    }

    /// One pass, whichever the plan: evaluate, rewrite the cohort days it changed.
    private func project(
        _ run: ProjectionRun, plan: inout some ProjectionPlan, from previous: Checkpoint, to current: Checkpoint
    ) throws -> Summary {
        let totals = try run.evaluate(&plan)
        let days = plan.cohortDays(evaluated: totals.affected)
        let funnels = run.configuration.funnels
        let configured = Set(funnels.map(\.name))
        let daysByFunnel = Dictionary(grouping: days, by: \.funnel).mapValues { Set($0.map(\.day)) }
        // What the day tables hold of the days to rewrite, read before any
        // is written, every funnel's in one statement per table: a funnel
        // at a time, the round trips would grow with the funnels.
        let storedTallies = try plan.storedTallies(run, days: days)
        // Each analysis's days to rewrite, and what it stored of them.
        var rewrites: [AnalysisRewrite] = []
        for analysis in run.analyses {
            // Besides the run's days, those whose stored persons changed
            // without a recompute, and those the clock alone changed.
            let change = plan.storedDayChange(of: analysis)
            var byFunnel = try analysis.daysDue(run.session, funnels: funnels, now: run.now)
            for (funnel, days) in daysByFunnel { byFunnel[funnel, default: []].formUnion(days) }
            for key in Array((change?.removed ?? [:]).keys) + Array((change?.added ?? [:]).keys) {
                byFunnel[key.funnel, default: []].insert(key.day)
            }
            byFunnel = byFunnel.filter { configured.contains($0.key) }
            let all = Set(byFunnel.flatMap { funnel, days in days.map { FunnelDay(funnel: funnel, day: $0) } })
            rewrites.append(AnalysisRewrite(
                analysis: analysis, days: byFunnel,
                stored: change == nil ? [:] : try analysis.storedDays(run.session, funnels: funnels, days: all)))
        }
        var writes = DayTableWrites()
        for funnel in funnels {
            let daySet = daysByFunnel[funnel.name] ?? []
            if !daySet.isEmpty {
                let tallies = try plan.tallies(
                    run, funnel: funnel, days: daySet, counted: totals.tallies[funnel.name] ?? [:],
                    stored: storedTallies[funnel.name] ?? [:])
                try CohortTables.rewrite(
                    &writes, funnel: funnel, days: daySet, tallies: tallies, now: run.now, timeZone: run.timeZone(for: funnel),
                    timeZoneName: run.timeZoneName(for: funnel))
            }
            for rewrite in rewrites {
                let analysis = rewrite.analysis
                guard let days = rewrite.days[funnel.name], !days.isEmpty else { continue }
                let tallies = totals.analysisTallies[analysis.table] ?? [:]
                let counted = Dictionary(uniqueKeysWithValues: days.compactMap { day in
                    tallies[FunnelDay(funnel: funnel.name, day: day)].map { (day, $0) }
                })
                try analysis.rewriteDays(
                    into: &writes, funnel: funnel, days: days.sorted(), counted: counted,
                    stored: rewrite.stored[funnel.name] ?? [:], change: plan.storedDayChange(of: analysis), now: run.now)
            }
        }
        try writes.write(run.session)
        return Summary(
            mode: plan.mode, previousHorizon: previous.horizon, horizon: current.horizon,
            newEvents: run.reading.newEvents.values.reduce(0, +), eventsRead: totals.events, personsRecomputed: totals.persons,
            groupsRecomputed: totals.groups, windowsClosed: plan.windowsClosed, cohortDaysRewritten: days.count)
    }

    /// What a pass rewrites of one analysis's day tables.
    private struct AnalysisRewrite {
        let analysis: any PersonAnalysis
        /// Funnel -> its cohort days to rewrite.
        var days: [String: Set<String>]
        /// Funnel -> day -> what the analysis stored of it (an incremental run's starting point).
        var stored: [String: [String: any AnalysisTally]]
    }

    /// The order apps go through the read-then-evaluate pipeline: the first
    /// app is read while nothing else runs and the last is evaluated after
    /// all reading is done, so both ends get small apps (by their new events)
    /// and the large ones overlap in the middle.
    static func pipelineOrder(_ apps: [String], sizes: [String: Int]) -> [String] {
        let ascending = apps.sorted { (sizes[$0] ?? 0, $0) < (sizes[$1] ?? 0, $1) }
        guard ascending.count > 2 else { return ascending }
        return [ascending[0]] + ascending[2...].reversed() + [ascending[1]]
    }
}
