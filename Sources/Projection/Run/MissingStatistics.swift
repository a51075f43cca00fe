import Foundation
import LibPQ
import LogReading
import NIOConcurrencyHelpers

/// The job's tables a rebuild left without statistics, and the columns
/// each is sampled on: what the next night's statements are planned with.
/// Without them its per-person lookups were planned blind, until
/// autovacuum came. A table that has statistics keeps them: the rows a
/// rebuild replaced came from the same log, so they describe the new ones
/// as well, and autovacuum takes them again after the commit, off the
/// rebuild's clock (an ANALYZE of every table was a measurable share of a
/// rebuild: BENCHMARKS.md). So only a first run, or the first since a
/// table was added, samples here.
///
/// Found inside the run's transaction, which wrote the tables, and taken
/// once it has committed, when other sessions see its rows, so that they
/// are sampled side by side, a session per core, where the run's session
/// sampled them in turn (BENCHMARKS.md, "A first run"). A run stopped
/// between its commit and these leaves them to autovacuum, or to the next rebuild.
struct MissingStatistics: Sendable {
    /// A schema-qualified table, its columns to sample ("" for all), and its size in pages.
    struct Target: Sendable {
        var statement: String
        var pages: Int64
    }

    private(set) var targets: [Target] = []

    init() {}

    /// Which of `tables` (in the run's schema) have no statistics yet.
    static func find(_ c: Connection, tables: [(table: String, columns: String)]) throws -> MissingStatistics {
        guard !tables.isEmpty else { return MissingStatistics() }
        let rows = try c.query(
            """
            SELECT t.ordinality::int8, format('%I.%I', current_schema(), t.name), pg_relation_size(format('%I.%I', current_schema(), t.name)) / 8192
            FROM unnest($1::text[]) WITH ORDINALITY AS t (name, ordinality)
            WHERE NOT EXISTS (SELECT 1 FROM pg_stats s WHERE s.schemaname = current_schema() AND s.tablename = t.name)
            """, [.textArray(tables.map(\.table))]
        ).rows
        var missing = MissingStatistics()
        for row in rows {
            let index = Int(try row.decode(Int64.self, at: 0)) - 1
            guard tables.indices.contains(index) else { continue }
            missing.targets.append(
                Target(statement: "\(try row.decode(String.self, at: 1)) \(tables[index].columns)", pages: try row.decode(Int64.self, at: 2)))
        }
        return missing
    }

    /// Samples the tables on sessions beside `c`, one per core (no more
    /// than there are tables): each session takes the next table, the
    /// largest first, as soon as it is done with its last, since what a
    /// table costs to sample follows its rows and columns more than its
    /// size. A session that cannot be opened leaves its tables to the others, or to `c`.
    func take(beside c: Connection, sessions: Int = ProcessInfo.processInfo.activeProcessorCount) throws {
        guard !targets.isEmpty else { return }
        let queue = NIOLockedValueBox(targets.sorted { $0.pages > $1.pages }.map(\.statement)[...])
        _ = try Background.mapOnEveryCore(Array(0..<max(1, min(sessions, targets.count)))) { _ in
            guard let session = try? c.sibling() else { return }
            while let statement = queue.withLockedValue({ $0.popFirst() }) { try session.executeScript("ANALYZE " + statement) }
        }
        while let statement = queue.withLockedValue({ $0.popFirst() }) { try c.executeScript("ANALYZE " + statement) }
    }
}
