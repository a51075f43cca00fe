import Foundation
import Funnels
import LibPQ

/// How a run differs by mode, and nothing else: what it reads, whom it
/// recomputes, and which cohort days it rewrites with what tallies. The
/// read-and-evaluate pipeline, the per-person analyses and the cohort tables
/// are the same for both plans (`ProjectionJob.run`), which is what keeps a
/// rebuild and the incremental runs giving the same tables.
protocol ProjectionPlan {
    var mode: ProjectionJob.Mode { get }

    /// Settles the stored tables before any history is read; returns the
    /// events each app's history will be read for (its order and sizing).
    mutating func prepare(_ run: ProjectionRun) throws -> Reading

    /// Whom to recompute in `app`: nil for every person its history holds.
    func persons(of app: String) -> Set<String>?

    /// `app`'s history, as this plan reads it; called once per app, in the
    /// order `Reading.readers` gives.
    mutating func history(of reader: PersonHistoryReader, _ run: ProjectionRun) throws -> SpilledHistory

    /// Called after every person was evaluated, before the cohort days are
    /// rewritten: puts back what `prepare` set aside, takes what it left to
    /// the background.
    mutating func finishEvaluation(_ run: ProjectionRun) throws

    /// The cohort days to rewrite, given what the evaluation touched.
    func cohortDays(evaluated: Set<FunnelDay>) -> Set<FunnelDay>

    /// The stored tallies `tallies` starts from, of every funnel's `days`
    /// in one read (none for a plan that counts every person).
    func storedTallies(_ run: ProjectionRun, days: Set<FunnelDay>) throws -> [String: [String: TallyStore.Stored]]

    /// The tallies of `days` of `funnel`, given what the evaluation counted
    /// and the funnel's `stored` tallies.
    func tallies(
        _ run: ProjectionRun, funnel: Funnel, days: Set<String>, counted: [String: FunnelTally], stored: [String: TallyStore.Stored]
    ) throws -> [String: FunnelTally]

    /// Outcomes whose window closed since the last run, closed in place.
    var windowsClosed: Int { get }

    /// How the stored days of analysis `index` changed before evaluation;
    /// nil when the plan counts every person (a rebuild).
    func storedDayChange(of index: Int) -> StoredDayChange?

    /// Lets go of what the plan holds beside the commit rather than before it.
    mutating func releaseInBackground()
}

/// What a run reads: the apps in the order their histories go through the
/// pipeline, the new events per app, and the partitions each history is cut into.
struct Reading {
    var readers: [PersonHistoryReader]
    var newEvents: [String: Int]
    var partitions: Int
    /// Events the run expects to read (for progress), when known.
    var expectedEvents: Int?
}

extension ProjectionPlan {
    mutating func releaseInBackground() {}

    /// The apps' history readers, small apps at both ends of the pipeline
    /// (`ProjectionJob.pipelineOrder`), without those nobody is recomputed in.
    func readers(_ run: ProjectionRun, sizes: [String: Int]) -> [PersonHistoryReader] {
        ProjectionJob.pipelineOrder(run.apps, sizes: sizes).compactMap { app -> PersonHistoryReader? in
            if let persons = persons(of: app), persons.isEmpty { return nil }
            let funnels = run.configuration.funnels(forApp: app)
            return PersonHistoryReader(app: app, paths: Array(Set(funnels.flatMap(\.referencedPaths))).sorted())
        }
    }
}

/// Everything from scratch: the projection tables emptied, every person of
/// every app recomputed, every cohort day written from what was counted.
/// Or, for funnels whose definition changed (`only`), the same for those
/// funnels alone, their rows removed beforehand (`DefinitionChanges.removeRows`)
/// and their apps' links rebuilt, beside the other funnels' stored rows.
struct RebuildPlan: ProjectionPlan {
    var mode: ProjectionJob.Mode { .rebuild }
    var windowsClosed: Int { 0 }
    /// The funnels recomputed, when not all: the tables keep the others' rows.
    let only: Set<String>?
    /// The events per app of the run's apps, when the run counted them already (`eventCounts`).
    let counted: [String: Int]?
    /// The primary keys and indexes dropped for the refill, to build once at the end.
    private var deferredIndexes: [String] = []

    init(only: Set<String>? = nil, counted: [String: Int]? = nil) {
        self.only = only
        self.counted = counted
    }

    /// Events per app of `apps` in the log (an app with none is left out).
    static func eventCounts(_ c: Connection, apps: [String]) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in try c.query("SELECT app, count(*) FROM events WHERE app = ANY($1) GROUP BY app", [.textArray(apps)]).rows {
            counts[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1)
        }
        return counts
    }

    mutating func prepare(_ run: ProjectionRun) throws -> Reading {
        let c = run.session
        if only == nil {
            let tables = ["identity_links", "funnel_persons", "funnel_daily", "funnel_cohorts", "funnel_tallies"]
                + run.analyses.flatMap { [$0.table] + $0.dayTables }
            try c.executeScript("TRUNCATE " + tables.joined(separator: ", "))
            for table in ["funnel_persons", "identity_links"] + run.analyses.map(\.table) {
                deferredIndexes += try Self.dropIndexes(c, table: table)
            }
        } else {
            // Rebuilt below, app by app, as a whole rebuild does.
            try c.query("DELETE FROM identity_links WHERE app = ANY($1::text[])", [.textArray(run.apps)])
        }
        let counts = try counted ?? Self.eventCounts(c, apps: run.apps)
        let total = counts.values.reduce(0, +)
        return Reading(
            readers: readers(run, sizes: counts), newEvents: counts,
            partitions: total / max(1, run.options.eventsPerPartition) + 1, expectedEvents: total)
    }

    func persons(of app: String) -> Set<String>? { nil }

    /// Each app's links first, then its whole history, on the reader: one
    /// app's links and history held at a time.
    mutating func history(of reader: PersonHistoryReader, _ run: ProjectionRun) throws -> SpilledHistory {
        let links = try IdentityLinker.rebuild(reading: run.reader, writing: run.session, app: reader.app)
        return try reader.spill(
            run.reader, scope: .all(links: links), partitions: run.reading.partitions, spillBuffer: run.options.spillBuffer)
    }

    func finishEvaluation(_ run: ProjectionRun) throws {
        for definition in deferredIndexes { try run.session.executeScript(definition) }
    }

    func cohortDays(evaluated: Set<FunnelDay>) -> Set<FunnelDay> { evaluated }

    func storedDayChange(of index: Int) -> StoredDayChange? { nil }

    func storedTallies(_ run: ProjectionRun, days: Set<FunnelDay>) throws -> [String: [String: TallyStore.Stored]] { [:] }

    func tallies(
        _ run: ProjectionRun, funnel: Funnel, days: Set<String>, counted: [String: FunnelTally], stored: [String: TallyStore.Stored]
    ) throws -> [String: FunnelTally] {
        counted
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
}

/// Only what changed since the last run's snapshot: the persons the new
/// events touch, with all their events however old, and the cohort days
/// their old and new outcomes and the windows closed since fall on.
struct IncrementalPlan: ProjectionPlan {
    var mode: ProjectionJob.Mode { .incremental }
    var windowsClosed: Int { start.windowsClosed }
    /// For sizing partitions only; a wrong guess costs a little speed.
    static let eventsPerPersonEstimate = 20

    let since: Checkpoint
    private var start = IncrementalStart()
    /// The histories, then, on a second session, what the touched persons'
    /// rows counted per analysis (nil: read before the deletes, on the one session).
    private var prefetch: HistoryPrefetch<[[FunnelDay: any AnalysisTally]]?>?
    /// Per analysis, read before the stored outcomes are removed.
    private var dayChanges: [StoredDayChange] = []

    init(since: Checkpoint) {
        self.since = since
    }

    /// Relinks, collects the touched persons, starts streaming their
    /// histories on the reader, and meanwhile deletes their stored outcomes
    /// (and every analysis's rows of them) and closes the windows that closed.
    mutating func prepare(_ run: ProjectionRun) throws -> Reading {
        let c = run.session
        let outcomeEvents = Dictionary(uniqueKeysWithValues: run.apps.map { app in
            (app, OutcomeEvents(funnels: run.configuration.funnels(forApp: app)))
        })
        let day = try NewEvents.read(c, outcomeEvents: outcomeEvents, since: since)
        defer { BackgroundRelease.drop(day) }
        let windows = Dictionary(run.configuration.funnels.map { ($0.name, $0.windowMicroseconds) }) { first, _ in first }
        let lookup = try PersonActivity.Lookup(
            c, windows: windows, retentionDays: Set(run.configuration.funnels.flatMap(\.retention.days)),
            activitySpan: day.activitySpan, minimumChunk: run.options.lookupChunk, scanShare: run.options.lookupScanShare)
        start = try IncrementalStart.collect(c, day: day, lookup: lookup, reader: run.reader)
        // Partitions are sized from the persons (a few dozen events each), as
        // counting their events costs as much as reading them.
        let partitions = start.personCount * Self.eventsPerPersonEstimate / max(1, run.options.eventsPerPartition) + 1
        let readers = readers(run, sizes: day.counts)
        // What the touched persons' rows counted is read on the reader after
        // their histories, while this session deletes them: it sees them as
        // the run found them. At 10 M events the deletes and these reads on
        // this session took longer than the histories on the reader.
        let analyses = run.analyses, secondSession = run.reader !== c
        let prefetch = HistoryPrefetch(
            readers, owners: start.owners, on: run.reader, partitions: partitions, spillBuffer: run.options.spillBuffer
        ) { reader in secondSession ? try analyses.map { try $0.touchedDayParts(reader) } : nil }
        run.onClose { prefetch.close() }
        self.prefetch = prefetch
        dayChanges = try run.analyses.map { try $0.storedDayChange(c, now: run.now, activity: start.activity) }
        if !secondSession {
            for (index, analysis) in run.analyses.enumerated() { dayChanges[index].removed = try analysis.touchedDayParts(c) }
        }
        let hadOutcomes = try start.removeStoredOutcomes(c, funnels: run.configuration.funnels, now: run.now, timeZone: run.timeZone(for:))
        for analysis in run.analyses { try analysis.deleteRecomputed(c, hadOutcomes: hadOutcomes) }
        return Reading(readers: readers, newEvents: day.counts, partitions: partitions, expectedEvents: nil)
    }

    func persons(of app: String) -> Set<String>? { start.touched[app] ?? [] }

    /// Lets go of the touched persons and the day's activity beside the
    /// commit rather than before it (`BackgroundRelease`).
    mutating func releaseInBackground() {
        BackgroundRelease.drop(start)
        start = IncrementalStart()
    }

    mutating func history(of reader: PersonHistoryReader, _ run: ProjectionRun) throws -> SpilledHistory {
        guard let prefetch else {
            throw ProjectionError(code: .spill, description: "the incremental run read a history before it was prepared")
        }
        return try prefetch.next()
    }

    /// Takes what the reader read of the touched persons' rows after their histories.
    mutating func finishEvaluation(_ run: ProjectionRun) throws {
        guard let prefetch, let parts = try prefetch.afterwards() else { return }
        for (index, removed) in parts.enumerated() where index < dayChanges.count { dayChanges[index].removed = removed }
    }

    func cohortDays(evaluated: Set<FunnelDay>) -> Set<FunnelDay> { start.affected.union(evaluated) }

    func storedDayChange(of index: Int) -> StoredDayChange? { index < dayChanges.count ? dayChanges[index] : StoredDayChange() }

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
