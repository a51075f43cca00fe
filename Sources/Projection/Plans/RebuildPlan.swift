import Foundation
import Funnels
import LibPQ
import LogReading

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
    /// The days the archive made final, as the run read them (`FrozenDays`).
    private(set) var frozen: FrozenDays
    /// App -> id -> the stored link, kept when months are archived: their
    /// evidence may be in the archive alone, and links are kept whole.
    private var keptLinks: [String: [String: IdentityLink]] = [:]

    init(only: Set<String>? = nil, counted: [String: Int]? = nil, frozen: FrozenDays) {
        self.only = only
        self.counted = counted
        self.frozen = frozen
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
        if frozen.before != nil {
            try frozen.loadPersons(c, from: "funnel_persons p")
            keptLinks = try IdentityLinker.stored(c, apps: run.apps)
        }
        let dayTables = ["funnel_persons", "funnel_daily", "funnel_cohorts", "funnel_tallies"] + run.analyses.flatMap { [$0.table] + $0.dayTables }
        if only == nil, frozen.before != nil {
            // The frozen days' rows stay; the rest is written again.
            try c.executeScript("TRUNCATE identity_links, audience_spans")
            for table in dayTables {
                try c.query("DELETE FROM \(table) WHERE cohort_day >= $1::date", [frozen.parameter])
            }
            for table in ["funnel_persons", "identity_links"] + run.analyses.map(\.table) {
                deferredIndexes += try Self.dropIndexes(c, table: table)
            }
        } else if only == nil {
            let tables = ["identity_links", "audience_spans"] + dayTables
            try c.executeScript("TRUNCATE " + tables.joined(separator: ", "))
            for table in ["funnel_persons", "identity_links"] + run.analyses.map(\.table) {
                deferredIndexes += try Self.dropIndexes(c, table: table)
            }
        } else {
            // Rebuilt below, app by app, as a whole rebuild does.
            try c.query("DELETE FROM identity_links WHERE app = ANY($1::text[])", [.textArray(run.apps)])
            // The apps' audiences are kept by this pass (`ProjectionJob.pass`), for every person.
            try c.query("DELETE FROM audience_spans WHERE app = ANY($1::text[])", [.textArray(run.apps)])
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
        let persons = try IdentityLinker.rebuild(
            reading: run.reader, writing: run.session, app: reader.app, keeping: keptLinks.removeValue(forKey: reader.app) ?? [:])
        let groups = reader.countsGroups ? try GroupMembership.all(run.reader, app: reader.app, persons: persons) : [:]
        return try run.spillWhole(reader, scope: .all(.init(owners: persons, groups: groups)))
    }

    func finishEvaluation(_ run: ProjectionRun) throws {
        for definition in deferredIndexes { try run.session.executeScript(definition) }
    }

    func cohortDays(evaluated: Set<FunnelDay>) -> Set<FunnelDay> { evaluated }

    func storedDayChange(of analysis: any PersonAnalysis) -> StoredDayChange? { nil }

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
