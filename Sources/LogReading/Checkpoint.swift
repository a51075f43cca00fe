package import EventLog
package import LibPQ

/// A reader's position in the log (the job's, a query-time store's): the
/// snapshot of its last read, as a transaction-id horizon plus the
/// transactions still running at that moment (see 002_projection.sql for
/// why not a seq).
package struct Checkpoint: Equatable, Sendable, Codable {
    package var horizon: Int64
    package var pending: [Int64]

    package init(horizon: Int64, pending: [Int64]) {
        self.horizon = horizon
        self.pending = pending
    }

    package static let start = Checkpoint(horizon: 0, pending: [])

    /// From a row of (horizon, pending transaction ids).
    package init(row: Row) throws {
        horizon = try row.decode(Int64.self, at: 0)
        pending = (try row.decode(PostgresArrayText.self, at: 1).integers() ?? []).compactMap { $0 }
    }

    /// The running transaction's snapshot: what this run will have read.
    package static func current(_ c: Connection) throws -> Checkpoint {
        let row = try c.query(
            """
            SELECT pg_snapshot_xmax(s)::text::int8,
                   ARRAY(SELECT x::text::int8 FROM pg_snapshot_xip(s) AS x ORDER BY 1)
            FROM pg_current_snapshot() AS s
            """
        ).scalarRow()
        return try Checkpoint(row: row)
    }

    /// The running transaction's snapshot as `current` gives it, taken
    /// before the transaction first reads the log: on Citus (`layout`), once
    /// every worker shows what the snapshot counts as committed
    /// (`PreparedCommits`), so that the rows read are never fewer than it says.
    package static func settled(_ c: Connection, layout: EventLogLayout) throws -> Checkpoint {
        let checkpoint = try current(c)
        if layout == .distributed { try PreparedCommits.settle(c) }
        return checkpoint
    }

    /// The running transaction's snapshot as `current` gives it, with its
    /// pending transactions found from the rows: every transaction id from
    /// the snapshot's oldest running one up to its horizon that wrote no row
    /// of `app` this transaction sees. On a hot standby `pg_current_snapshot()`
    /// lists no running transaction (recovery keeps them apart), and one still
    /// open on the primary below the horizon would be skipped for good; an id
    /// listed that wrote nothing, or nothing of `app`, costs nothing.
    package static func unseen(_ c: Connection, app: String) throws -> Checkpoint {
        let row = try c.query(
            """
            WITH s AS (
                SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8 AS low,
                       pg_snapshot_xmax(pg_current_snapshot())::text::int8 AS high)
            SELECT s.high, ARRAY(
                SELECT x FROM generate_series(s.low, s.high - 1) AS x
                EXCEPT
                SELECT e.txid FROM analytics.event_log e WHERE e.app = $1 AND e.txid >= s.low AND e.txid < s.high
                ORDER BY 1)
            FROM s
            """, [.text(app)]
        ).scalarRow()
        return try Checkpoint(row: row)
    }
}

extension QueryResult {
    /// The first row, or an error when there is none.
    package func scalarRow() throws -> Row {
        guard let row = first else { throw PostgresError(.unexpectedResult, message: "expected one row, got none") }
        return row
    }
}
