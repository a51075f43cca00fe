import Foundation
import LibPQ
import LocalPostgres
import LogReading
import Projection
import TestSupport
import Testing

/// The job's windows read under a later snapshot than their end, as on
/// Citus, where each worker's snapshot is taken when it is first read: still
/// every committed row falls in exactly one window.
@Suite("the job's window of new events")
struct LogWindowTests {
    @Test("windows read after more commits: each row in exactly one, a transaction open at a window's end in the next")
    func eachRowOnce() async throws {
        let db = try await TestDatabase.create()
        let insert = """
            INSERT INTO events (app, type, message_id, event, anonymous_id, "timestamp", received_at)
            VALUES ('x', 'track', $1, 'e', 'd', now(), now())
            """
        let writer = try Connection.connect(db.url)
        let open = try Connection.connect(db.url)
        let reader = try Connection.connect(db.url)
        func checkpoint() throws -> Checkpoint {
            try reader.transaction(isolation: .repeatableRead) { try Checkpoint.current($0) }
        }
        try writer.query(insert, [.text("a")])
        try open.executeScript("BEGIN")
        try open.query(insert, [.text("b")])
        let openID = try open.query("SELECT pg_current_xact_id()::text::int8").scalar(Int64.self)
        try writer.query(insert, [.text("c")])
        let first = try checkpoint()
        try open.executeScript("COMMIT")
        try writer.query(insert, [.text("d")])
        let second = try checkpoint()
        try writer.query(insert, [.text("e")])
        let third = try checkpoint()
        try writer.query(insert, [.text("f")])  // committed after every window's end, seen by every read below
        let windows = [LogWindow.upTo(first), LogWindow(from: first, to: second), LogWindow(from: second, to: third)]
        let read = try windows.map { window in
            try reader.transaction(isolation: .repeatableRead) { c in
                try window.bind(c)
                return try c.query(
                    "SELECT coalesce(string_agg(message_id, ',' ORDER BY message_id), '') FROM events e WHERE \(LogWindow.condition)"
                ).scalar(String.self)
            }
        }
        #expect(first.pending.contains(openID) && first.horizon > openID, "\(first)")
        #expect(read == ["a,c", "b,d", "e"])
        try await db.drop()
    }
}
