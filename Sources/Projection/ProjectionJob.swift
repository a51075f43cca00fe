public import Foundation
public import Funnels
public import LibPQ

/// The nightly job (SPEC §5): folds the log into per-person funnel outcomes and
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
public struct ProjectionJob: Sendable {
    public enum Mode: String, Sendable { case incremental, rebuild }

    public struct Summary: Sendable, Equatable {
        public var mode: Mode
        public var previousHorizon: Int64
        public var horizon: Int64
        /// Events committed since the last run (the run's new input).
        public var newEvents: Int
        /// Events read to recompute the touched persons.
        public var eventsRead: Int
        public var personsRecomputed: Int
        /// Outcomes whose window closed since the last run, closed in place.
        public var windowsClosed: Int
        public var cohortDaysRewritten: Int
    }

    static let lockKey: Int64 = 0x6f6e_7261_6d70_02
    /// For sizing an incremental run's partitions only; a wrong guess costs a little speed.
    static let eventsPerPersonEstimate = 20

    public let configuration: FunnelConfiguration
    /// Overrides the configured report time zone for cohort days.
    public let timeZoneOverride: String?
    public let showProgress: Bool
    /// Events per spill partition and bytes buffered per partition before it
    /// goes to disk (see `PersonHistoryReader`); tests make them small.
    var eventsPerPartition = PersonHistoryReader.eventsPerPartition
    var spillBuffer = 1 << 20
    /// Whether the log is read on a second session; without one (or when it
    /// can't be had) the run's own session reads too, and tests check both.
    var secondSession = true
    /// Threads evaluating partitions; PostgreSQL needs a core for the COPY running meanwhile.
    var workers = max(1, min(4, ProcessInfo.processInfo.activeProcessorCount))

    public init(configuration: FunnelConfiguration, timeZoneOverride: String? = nil, showProgress: Bool = true) {
        self.configuration = configuration
        self.timeZoneOverride = timeZoneOverride
        self.showProgress = showProgress
    }

    /// Runs the job on `c` (blocking; call it inside `pool.withConnection`).
    public func run(_ c: Connection, mode: Mode, now: Int64 = Timestamps.microseconds(Date())) throws -> Summary {
        guard try c.query("SELECT pg_try_advisory_lock($1)", [.int(Self.lockKey)]).scalar(Bool.self) else {
            throw ProjectionError.busy
        }
        defer { _ = try? c.query("SELECT pg_advisory_unlock($1)", [.int(Self.lockKey)]) }
        return try c.transaction(isolation: "REPEATABLE READ") { c in
            // Once a night, for the run's session and its reader: room for the
            // incremental run's sorts and the rebuild's index builds, which
            // spill to disk at the defaults.
            var settings = "SET LOCAL work_mem = '128MB'; SET LOCAL maintenance_work_mem = '256MB';"
            // The incremental run's key-by-key statements are estimated dear
            // enough to be JIT-compiled, which took longer than running them.
            if mode == .incremental { settings += " SET LOCAL jit = off;" }
            try c.executeScript(settings)
            return try runLocked(c, mode: mode, now: now, settings: settings)
        }
    }

    /// Drops `table`'s primary key and indexes and returns the statements that
    /// recreate them: a rebuild refills the table whole, and building an index
    /// once afterwards, by a sort, is cheaper than updating it row by row.
    /// Inside the run's transaction, so a killed run leaves them as they were.
    /// The statements come from the catalog, never from input.
    static func dropIndexes(_ c: Connection, table: String) throws -> [String] {
        let rows = try c.query(
            """
            SELECT format('ALTER TABLE %I DROP CONSTRAINT %I', $1::text, k.conname),
                   format('ALTER TABLE %I ADD CONSTRAINT %I %s', $1::text, k.conname, pg_get_constraintdef(k.oid))
            FROM pg_constraint k WHERE k.conrelid = $1::regclass AND k.contype = 'p'
            UNION ALL
            SELECT format('DROP INDEX %I.%I', i.schemaname, i.indexname), i.indexdef
            FROM pg_indexes i
            WHERE i.tablename = $1 AND i.schemaname = current_schema()
              AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conname = i.indexname AND k.conrelid = $1::regclass)
            """, [.text(table)]
        ).rows
        var definitions: [String] = []
        for row in rows {
            try c.executeScript(try row.decode(String.self, at: 0))
            definitions.append(try row.decode(String.self, at: 1))
        }
        return definitions
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

    func timeZone(for funnel: Funnel) -> TimeZone {
        TimeZone(identifier: timeZoneName(for: funnel)) ?? TimeZone(identifier: "UTC") ?? .current
    }

    /// As configured ("UTC"; Foundation on Linux would call it "GMT").
    func timeZoneName(for funnel: Funnel) -> String {
        timeZoneOverride ?? configuration.timeZoneIdentifier(for: funnel)
    }

    private func runLocked(_ c: Connection, mode: Mode, now: Int64, settings: String) throws -> Summary {
        SpilledHistory.removeAbandoned()
        let current = try Checkpoint.current(c)
        let previous = mode == .rebuild ? Checkpoint.start : try Checkpoint.load(c)
        let apps = Array(Set(configuration.funnels.map(\.app))).sorted()
        var deferredIndexes: [String] = []
        // The log is read on a second session (see `SnapshotReader`), opened
        // before the run writes anything.
        let reads = secondSession ? try SnapshotReader.open(beside: c, settings: settings) : c
        if mode == .rebuild {
            try c.executeScript("TRUNCATE identity_links, funnel_persons, funnel_daily, funnel_cohorts, funnel_tallies")
            deferredIndexes = try Self.dropIndexes(c, table: "funnel_persons") + Self.dropIndexes(c, table: "identity_links")
        }
        var newByApp: [String: Int] = [:]
        var day = NewEvents()
        switch mode {
        case .rebuild:
            for row in try c.query("SELECT app, count(*) FROM events WHERE app = ANY($1) GROUP BY app", [.textArray(apps)]).rows {
                newByApp[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1)
            }
        case .incremental:
            day = try NewEvents.read(c, apps: Set(apps), since: previous)
            newByApp = day.counts
        }
        let newEvents = newByApp.values.reduce(0, +)
        var start = mode == .incremental ? try IncrementalStart.collect(c, day: day, reader: reads) : IncrementalStart()
        // A rebuild reads everything; an incremental run's partitions are sized
        // from the persons (a few dozen events each), as counting their events
        // costs as much as reading them.
        let expectedEvents = mode == .rebuild ? newEvents : start.personCount * Self.eventsPerPersonEstimate
        let partitions = expectedEvents / max(1, eventsPerPartition) + 1
        let readers = Self.pipelineOrder(apps, sizes: newByApp).compactMap { app -> PersonHistoryReader? in
            if mode == .incremental, start.touched[app]?.isEmpty ?? true { return nil }
            let funnels = configuration.funnels(forApp: app)
            return PersonHistoryReader(app: app, paths: Array(Set(funnels.flatMap(\.referencedPaths))).sorted())
        }
        // An incremental run's histories stream in on the reader while the
        // run's session settles the stored outcomes; a rebuild reads each
        // app's links and history in turn, below, to hold one app's at a time.
        var prefetch: HistoryPrefetch?
        defer { prefetch?.close() }
        if mode == .incremental {
            prefetch = HistoryPrefetch(readers, on: reads, partitions: partitions, spillBuffer: spillBuffer)
            try start.removeStoredOutcomes(c, funnels: configuration.funnels, now: now, timeZone: timeZone(for:))
        }

        let progress = Progress(
            label: mode == .rebuild ? "rebuild" : "report", total: mode == .rebuild ? expectedEvents : nil, enabled: showProgress)
        // Outcome rows are COPYed in the background while more partitions are evaluated.
        let copier = CopyPipeline(connection: c, statement: OutcomeStore.copyStatement)
        defer { try? copier.wait() }
        var totals = PartitionEvaluation.Totals()
        // One app is evaluated while the next one's history streams in.
        var running: PartitionEvaluation.Running?
        defer { _ = try? running?.finish() }
        for reader in readers {
            let funnels = configuration.funnels(forApp: reader.app)
            let history: SpilledHistory
            if let prefetch {
                history = try prefetch.next()
            } else {
                let links = try IdentityLinker.rebuild(reading: reads, writing: c, app: reader.app)
                history = try reader.spill(reads, scope: .all(links: links), partitions: partitions, spillBuffer: spillBuffer)
            }
            if let previous = running {
                running = nil
                totals.merge(try previous.finish())
            }
            let evaluation = PartitionEvaluation(
                funnels: funnels, timeZones: funnels.map(timeZone(for:)), shapes: funnels.map(FunnelTally.Shape.init),
                touched: mode == .incremental ? start.touched[reader.app] : nil, now: now)
            running = evaluation.start(history, reader: reader, workers: workers, copier: copier, progress: progress)
        }
        if let last = running {
            running = nil
            totals.merge(try last.finish())
        }
        try copier.wait()
        let affected = start.affected.union(totals.affected)
        progress.finish()
        for definition in deferredIndexes { try c.executeScript(definition) }

        try writeCohortDays(c, mode: mode, affected: affected, counted: totals.tallies, start: start, now: now)
        try TargetTable.write(c, configuration: configuration)
        try current.save(c)
        return Summary(
            mode: mode, previousHorizon: previous.horizon, horizon: current.horizon, newEvents: newEvents, eventsRead: totals.events,
            personsRecomputed: totals.persons, windowsClosed: start.windowsClosed, cohortDaysRewritten: affected.count)
    }

    /// Rewrites the cohort tables of the funnel days the run changed. A
    /// rebuild's day tallies are what it counted; an incremental run's are the
    /// stored ones, less the outcomes it deleted or closed, plus the ones it
    /// counted and the closed ones as they are now.
    private func writeCohortDays(
        _ c: Connection, mode: Mode, affected: Set<FunnelDay>, counted: [String: [String: FunnelTally]], start: IncrementalStart,
        now: Int64
    ) throws {
        let daysByFunnel = Dictionary(grouping: affected, by: \.funnel)
        for funnel in configuration.funnels {
            guard let days = daysByFunnel[funnel.name] else { continue }
            let daySet = Set(days.map(\.day))
            let zone = timeZone(for: funnel)
            var added = counted[funnel.name] ?? [:]
            for (day, tally) in start.closed[funnel.name] ?? [:] { added[day, default: FunnelTally(funnel: funnel)].merge(tally) }
            let dayTallies = mode == .rebuild ? added : try CohortTables.replacing(
                c, funnel: funnel, days: daySet, removed: start.removed[funnel.name] ?? [:], added: added,
                untallied: start.untallied[funnel.name] ?? [], timeZone: zone, timeZoneName: timeZoneName(for: funnel))
            try CohortTables.rewrite(
                c, funnel: funnel, days: daySet, tallies: dayTallies, now: now, timeZone: zone, timeZoneName: timeZoneName(for: funnel))
        }
    }
}
