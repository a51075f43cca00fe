import LibPQ

/// A second session that sees exactly what the run's transaction sees (its
/// exported snapshot), so a rebuild streams the next app's log while the
/// run's own session stores outcomes. On one session the two take turns:
/// evaluated partitions wait behind each history read. (On a 2-core machine,
/// where the rebuild is CPU-bound, this measured even; it is for more cores.)
/// The reader only reads the log, which the run never changes, so the run's
/// own writes need not be visible to it.
enum SnapshotReader {
    /// Opens the reader beside `c`, which must be inside a REPEATABLE READ
    /// transaction; falls back to `c` itself when a second session can't be
    /// had (a full `max_connections`), which is only slower.
    static func open(beside c: Connection) throws -> Connection {
        let id = try c.query("SELECT pg_export_snapshot()").scalar(String.self)
        // SET TRANSACTION SNAPSHOT takes no parameters; the id is PostgreSQL's
        // own, and must be hex digits and dashes to be written into it.
        guard !id.isEmpty, id.allSatisfy({ $0.isHexDigit || $0 == "-" }) else {
            throw PostgresError(.unexpectedResult, message: "unexpected snapshot id \(id)")
        }
        guard let reader = try? c.sibling() else { return c }
        try reader.executeScript(
            "BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT '\(id)'; SET LOCAL work_mem = '128MB'")
        return reader
    }
}
