import Foundation
import Funnels
import LibPQ
import LocalPostgres
@testable import Projection
import TestSupport
import Testing

/// A per-person analysis plugs into the job as one type and its table: both
/// plans serve it without knowing it, and an incremental run leaves its table
/// as a rebuild writes it.
@Suite struct PersonAnalysisTests {
    /// Per person and funnel: the level reached and the events the person had then.
    struct LevelAndEvents: PersonAnalysis {
        let table = "test_levels"
        let copyStatement = "COPY test_levels (app, person_id, funnel, cohort_day, level, events) FROM STDIN (FORMAT binary)"

        func append(
            _ evaluated: EvaluatedFunnel, events: [FunnelEvent], to rows: inout BinaryCopyRows, tally: inout (any AnalysisTally)?
        ) throws {
            rows.startRow(fields: 6)
            _ = rows.append(text: evaluated.funnel.app) && rows.append(text: evaluated.person)
                && rows.append(text: evaluated.funnel.name)
            rows.append(date: evaluated.cohortDay)
            rows.append(int32: Int32(clamping: evaluated.outcome.level))
            rows.append(int32: Int32(clamping: events.count))
        }
    }

    static let table = """
        CREATE TABLE test_levels (app text, person_id text, funnel text, cohort_day date, level int, events int);
        CREATE INDEX ON test_levels (app, person_id)
        """

    @Test("an analysis's table after a rebuild and two incremental runs equals a rebuild's, row for row, beside funnel_persons")
    func incrementalRunsKeepAnAnalysisEqualToARebuild() async throws {
        let configuration = bundledConfiguration
        let events = EventSeeder.journeys(configuration: configuration, personsPerFunnel: 120, seed: 33)
        let third = events.count / 3
        var configured = ProjectionJob(configuration: configuration, showProgress: false)
        configured.analyses = [LevelAndEvents()]
        configured.options.eventsPerPartition = 200
        let job = configured
        let now: Int64 = 1_900_000_000_000_000
        let dump = "SELECT concat_ws('|', app, person_id, funnel, cohort_day, level, events) FROM test_levels ORDER BY 1"
        var tables: [[String]] = []
        var outcomes: [Int] = []
        for incremental in [true, false] {
            let db = try await TestDatabase.create()
            let pool = db.pool(maxConnections: 1)
            try await pool.withConnection { c in try c.executeScript(Self.table) }
            if incremental {
                try await pool.withConnection { c in try EventSeeder.insert(c, Array(events.prefix(third))) }
                _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: now) }
                try await pool.withConnection { c in try EventSeeder.insert(c, Array(events.dropFirst(third).prefix(third))) }
                _ = try await pool.withConnection { c in try job.run(c, mode: .incremental, now: now) }
                try await pool.withConnection { c in try EventSeeder.insert(c, Array(events.dropFirst(2 * third))) }
                _ = try await pool.withConnection { c in try job.run(c, mode: .incremental, now: now) }
            } else {
                try await pool.withConnection { c in try EventSeeder.insert(c, events) }
                _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: now) }
            }
            tables.append(try await pool.query(dump).rows.map { try $0.decode(String.self, at: 0) })
            outcomes.append(try await pool.query("SELECT count(*) FROM funnel_persons").scalar(Int.self))
            await pool.close()
            try await db.drop()
        }
        #expect(tables[0].count > 100)
        #expect(tables[0] == tables[1])
        #expect(tables[0].count == outcomes[0], "one row per funnel_persons row")
        #expect(outcomes[0] == outcomes[1])
    }
}
