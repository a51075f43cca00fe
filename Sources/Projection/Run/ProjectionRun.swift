import Foundation
import Funnels
import LibPQ
import LogReading

/// One run of the nightly job and what it holds, owned by one scoped call
/// (`ProjectionRun.with`), as a client that owns its connections runs them:
/// the run's session (inside its REPEATABLE READ transaction), the snapshot
/// reader beside it, and the two lanes work runs on beside the run
/// (`Background`): the reader's (its statements in order) and the
/// evaluation workers' (each COPYs what it produced on the run's session).
/// Whether the body returns or throws, they are closed in one place, in the
/// one safe order: background reads stopped, evaluations finished, lanes
/// shut down.
final class ProjectionRun {
    /// How the run reads and evaluates; tests make the partitions small.
    struct Options: Sendable {
        /// Events per spill partition (see `PersonHistoryReader`).
        var eventsPerPartition = PersonHistoryReader.eventsPerPartition
        /// Bytes buffered per partition before it goes to disk.
        var spillBuffer = 1 << 20
        /// Whether the log is read on a second session; without one (or when it
        /// can't be had) the run's own session reads too, and tests check both.
        var secondSession = true
        /// Keys are looked up by scan when at least this share of the
        /// table's rows (`PersonActivity.Lookup`): the active persons' stored
        /// outcomes, the new links; tests pick one way.
        var lookupScanShare = 1.0 / 16
        /// Distinct property objects an app's catalogue tally keeps before leaving its paths to SQL.
        var catalogueShapes = EventCatalogTally.ShapeLimit()
        /// Threads evaluating partitions: while one waits for its COPY, another evaluates.
        var workers = max(1, min(4, ProcessInfo.processInfo.activeProcessorCount))

        /// The defaults, less the concurrent steps the environment turns
        /// off: what `onramp-bench` measures each of them by (BENCHMARKS.md,
        /// "What runs concurrently"): `ONRAMP_JOB_WORKERS=N`,
        /// `ONRAMP_JOB_SECOND_SESSION=off`.
        init(environment: [String: String] = ProcessInfo.processInfo.environment) {
            if let workers = environment["ONRAMP_JOB_WORKERS"].flatMap(Int.init), workers >= 1 { self.workers = workers }
            if environment["ONRAMP_JOB_SECOND_SESSION"] == "off" { secondSession = false }
        }
    }

    /// The funnels this run computes: the job's, or some of them (`ProjectionJob.pass`).
    let configuration: FunnelConfiguration
    let options: Options
    let showProgress: Bool
    let now: Int64
    /// The per-person analyses after the funnel evaluator.
    let analyses: [any PersonAnalysis]
    /// The apps the configured funnels are of.
    let apps: [String]
    /// The run's own session: every write, in the run's transaction.
    let session: Connection
    /// Where the log is read: a second session under the run's snapshot, or `session`.
    let reader: Connection
    /// How lookups by key are written: for one PostgreSQL, or for Citus.
    let dialect: SQLDialect
    /// Statements on `reader` beside the run's own (one thread: in order).
    let readerLane = Background(threads: 1)
    /// Where partitions are evaluated.
    private let workerLane: Background
    /// The event catalogue, when the run counts some apps whole: counted on the read of their histories.
    let catalogue: CatalogueCount?
    /// The tallies being stored, by app, and then what they stored.
    private var catalogueWrites: [(app: String, write: Pending<EventCatalog.Counted?>)] = []
    private(set) var cataloguesCounted: [String: EventCatalog.Counted] = [:]
    /// What the plan reads; set by `evaluate` once the plan is prepared.
    private(set) var reading = Reading(readers: [], newEvents: [:], partitions: 1, expectedEvents: nil)
    private var closers: [() -> Void] = []

    /// What a run counts of the event catalogue on its read (`EventCatalog.begin`).
    struct CatalogueCount: Sendable {
        let catalog: EventCatalog
        let whole: EventCatalog.Whole
        /// The run's snapshot, where a read may show more than it (Citus); nil on one PostgreSQL.
        let snapshot: Checkpoint?
    }

    private init(
        job: ProjectionJob, configuration: FunnelConfiguration, session: Connection, reader: Connection, dialect: SQLDialect,
        now: Int64, catalogue: CatalogueCount?
    ) {
        self.catalogue = catalogue
        self.configuration = configuration
        options = job.options
        analyses = job.analyses
        apps = Array(Set(configuration.funnels.map(\.app))).sorted()
        showProgress = job.showProgress
        self.now = now
        self.session = session
        self.reader = reader
        self.dialect = dialect
        workerLane = Background(threads: job.options.workers)
    }

    /// Runs `body` with a run of `configuration`'s funnels on `session`, which must be inside the run's
    /// REPEATABLE READ transaction with `settings` applied; the reader gets
    /// the same settings. Everything the run started is closed when it ends.
    static func with<T>(
        _ job: ProjectionJob, configuration: FunnelConfiguration, session: Connection, dialect: SQLDialect, settings: String,
        now: Int64, catalogue: CatalogueCount? = nil, _ body: (ProjectionRun) throws -> T
    ) throws -> T {
        // The reader sees the run's snapshot, none of its writes (see
        // `SnapshotReader`): in a run's second pass, the rows the first
        // deleted, which the pass's funnels alone are read from.
        let reader = job.options.secondSession
            ? try SnapshotReader.open(beside: session, settings: settings) : session
        let run = ProjectionRun(
            job: job, configuration: configuration, session: session, reader: reader, dialect: dialect, now: now,
            catalogue: catalogue)
        defer { run.close() }
        return try body(run)
    }

    /// `body` runs when the run closes, before the lanes shut down (last added, first run).
    func onClose(_ body: @escaping () -> Void) {
        closers.append(body)
    }

    private func close() {
        for body in closers.reversed() { body() }
        closers = []
        for lane in [readerLane, workerLane] { lane.shutdown() }
    }

    /// `reader`'s whole history (`scope` holds everyone), spilled; when the
    /// run counts the app's event catalogue whole, counted on the way and
    /// stored beside the evaluation (the next app's read does not wait for it).
    func spillWhole(_ reader: PersonHistoryReader, scope: PersonHistoryReader.Scope) throws -> SpilledHistory {
        guard let catalogue, catalogue.whole.contains(reader.app) else {
            return try reader.spill(self.reader, scope: scope, partitions: reading.partitions, spillBuffer: options.spillBuffer)
        }
        var tally = EventCatalogTally(
            reader: reader, zone: catalogue.catalog.zone(of: reader.app), snapshot: catalogue.snapshot, shapeLimit: options.catalogueShapes)
        let history = try reader.spill(
            self.reader, scope: scope, partitions: reading.partitions, spillBuffer: options.spillBuffer, tally: &tally)
        let (counted, session, catalog) = (tally, self.session, catalogue.catalog)
        catalogueWrites.append((reader.app, workerLane.run { try catalog.write(session, counted) }))
        return history
    }

    func timeZone(for funnel: Funnel) -> TimeZone {
        TimeZone(identifier: timeZoneName(for: funnel)) ?? TimeZone(identifier: "UTC") ?? .current
    }

    /// As configured ("UTC"; Foundation on Linux would call it "GMT").
    func timeZoneName(for funnel: Funnel) -> String {
        configuration.timeZoneIdentifier(for: funnel)
    }

    /// Prepares `plan`, then streams each app's history through the funnel
    /// evaluator and the per-person analyses: one app is evaluated, on the
    /// worker threads, while the next one's history is read. Returns what
    /// the evaluation counted, once every outcome row is stored.
    func evaluate(_ plan: inout some ProjectionPlan) throws -> PartitionEvaluation.Totals {
        reading = try plan.prepare(self)
        let progress = Progress(
            label: plan.mode == .rebuild ? "rebuild" : "report", total: reading.expectedEvents, enabled: showProgress)
        var totals = PartitionEvaluation.Totals()
        var running: PartitionEvaluation.Running?
        defer { _ = try? running?.finish() }
        do {
            for reader in reading.readers {
                let funnels = configuration.funnels(forApp: reader.app)
                let history = try plan.history(of: reader, self)
                if let previous = running {
                    running = nil
                    totals.merge(try previous.finish())
                }
                let evaluation = PartitionEvaluation(
                    funnels: funnels, timeZones: funnels.map(timeZone(for:)), shapes: funnels.map(FunnelTally.Shape.init),
                    persons: plan.persons(of: reader.app), analyses: analyses, audiences: configuration.audiences(forApp: reader.app),
                    now: now, frozen: plan.frozen)
                running = evaluation.start(history, reader: reader, workers: workerLane, session: session, progress: progress)
            }
            if let last = running {
                running = nil
                totals.merge(try last.finish())
            }
        } catch {
            // A catalogue write that failed aborted the run's transaction: its error says why, not the next statement's.
            for (_, write) in catalogueWrites {
                if case .failure(let failure) = Result(catching: { try write.wait() }) { throw failure }
            }
            throw error
        }
        for (app, write) in catalogueWrites {
            if let counted = try write.wait() { cataloguesCounted[app] = counted }
        }
        catalogueWrites = []
        progress.finish()
        try plan.finishEvaluation(self)
        return totals
    }
}
