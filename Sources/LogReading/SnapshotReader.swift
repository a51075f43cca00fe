package import LibPQ

/// A second session that sees exactly what the run's transaction sees (its
/// exported snapshot), so the job streams history while the run's own
/// session deletes and stores outcomes. On one session the two take turns:
/// evaluated partitions wait behind each history read, and an incremental
/// run's reads behind its deletes. The reader reads the log, which the run
/// never changes, so the run's own writes need not be visible to it; what
/// it needs of them (the touched persons) is handed to it.
package enum SnapshotReader {
    /// Opens the reader beside `c`, which must be inside a REPEATABLE READ
    /// transaction, with the run's `settings` (a script of `SET LOCAL`s), on a
    /// new session; falls back to `c` itself when a second session can't be
    /// had (a full `max_connections`), which is only slower.
    package static func open(beside c: Connection, settings: String = "") throws -> Connection {
        let id = try c.query("SELECT pg_export_snapshot()").scalar(String.self)
        // SET TRANSACTION SNAPSHOT takes no parameters; the id is PostgreSQL's
        // own, and must be hex digits and dashes to be written into it.
        guard !id.isEmpty, id.allSatisfy({ $0.isHexDigit || $0 == "-" }) else {
            throw PostgresError(.unexpectedResult, message: "unexpected snapshot id \(id)")
        }
        guard let reader = try? c.sibling() else { return c }
        try reader.executeScript(
            "BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT '\(id)'; \(settings)")
        return reader
    }
}
