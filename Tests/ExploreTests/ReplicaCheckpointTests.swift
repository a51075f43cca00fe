import Foundation
import LibPQ
import LocalPostgres
import LogReading
import TestSupport
import Testing

/// On a replica the snapshot names no running transaction, so the store's
/// checkpoint there takes its pending transactions from the rows
/// (`Checkpoint.unseen`): a transaction still open at one read, below the
/// horizon, is read by the next. Shown on a primary, where the rows say the
/// same as the snapshot would.
@Suite("the explore store's checkpoint from the rows")
struct ReplicaCheckpointTests {
    @Test("a transaction open at the read is pending; its row is read next time, and a row already read is not")
    func openTransactionReadNextTime() async throws {
        let db = try await TestDatabase.create()
        let now = Timestamps.microseconds(Date())
        let pool = db.pool(maxConnections: 1)
        try await pool.withConnection { c in
            try EventSeeder.insert(c, [SeedEvent(app: "x", messageId: "seen", event: "a", anonymousId: "d1", timestamp: now)])
        }
        await pool.close()
        let writer = try Connection.connect(db.url)
        try writer.executeScript("BEGIN")
        try writer.query(
            """
            INSERT INTO events (app, type, message_id, event, anonymous_id, "timestamp", received_at)
            VALUES ('x', 'track', 'late', 'b', 'd2', now(), now())
            """)
        let open = try writer.query("SELECT pg_current_xact_id()::text::int8").scalar(Int64.self)
        // A later transaction commits while the first is still open: the horizon passes the open one.
        let later = try Connection.connect(db.url)
        try later.query(
            """
            INSERT INTO events (app, type, message_id, event, anonymous_id, "timestamp", received_at)
            VALUES ('x', 'track', 'after', 'c', 'd3', now(), now())
            """)
        let reader = try Connection.connect(db.url)
        let (checkpoint, seen) = try reader.transaction(isolation: .repeatableRead) { c in
            (try Checkpoint.unseen(c, app: "x"),
             try c.query("SELECT array_agg(txid ORDER BY txid)::text FROM analytics.event_log WHERE app = 'x'").scalar(String.self))
        }
        #expect(checkpoint.horizon > open)
        #expect(checkpoint.pending.contains(open), "\(checkpoint) \(seen)")
        let seenTxids = seen.trimmingCharacters(in: CharacterSet(charactersIn: "{}")).split(separator: ",").compactMap { Int64($0) }
        #expect(seenTxids.count == 2 && seenTxids.allSatisfy { !checkpoint.pending.contains($0) }, "\(checkpoint) \(seen)")
        try writer.executeScript("COMMIT")
        let next = try reader.transaction(isolation: .repeatableRead) { c in
            try LogWindow(from: checkpoint, to: try Checkpoint.unseen(c, app: "x")).bind(c)
            return try c.query(
                "SELECT array_agg(message_id ORDER BY message_id)::text FROM analytics.event_log e WHERE e.app = 'x' AND \(LogWindow.condition)"
            ).scalar(String.self)
        }
        #expect(next == "{late}")
        try await db.drop()
    }
}
