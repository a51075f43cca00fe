import Foundation
import LibPQ
import LocalPostgres
import Testing

/// What the first migration promises about the event log.
@Suite("event log schema")
struct EventLogSchemaTests {
    @Test("events are partitioned by month, with partitions ahead of now and a default catch-all")
    func partitions() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let names = try await pool.query(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass ORDER BY 1"
        ).rows.map { try $0.decode(String.self, at: 0) }
        let thisMonth = try await pool.query("SELECT to_char(now() AT TIME ZONE 'UTC', '\"events_y\"YYYY\"m\"MM')").scalar(String.self)
        let inThreeMonths = try await pool.query(
            "SELECT to_char((now() AT TIME ZONE 'UTC') + interval '3 months', '\"events_y\"YYYY\"m\"MM')"
        ).scalar(String.self)
        #expect(names.contains(thisMonth))
        #expect(names.contains(inThreeMonths))
        #expect(names.contains("events_default"))
        #expect(try await pool.query("SELECT onramp_ensure_event_partitions(1, 3)").scalar(Int.self) == 0)
        #expect(try await pool.query("SELECT onramp_ensure_event_partitions(1, 6)").scalar(Int.self) == 3)
        await pool.close()
        try await db.drop()
    }

    @Test("every partition's BRIN index is summarized as its ranges fill, partitions made later too")
    func brinAutosummarize() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        #expect(try await pool.query("SELECT onramp_ensure_event_partitions(1, 6)").scalar(Int.self) == 3)
        // The BRIN index of each partition and of `events` itself, with its storage parameters.
        let indexes = try await pool.query(
            """
            SELECT t.relname, coalesce(array_to_string(c.reloptions, ','), '')
            FROM pg_index x
            JOIN pg_class c ON c.oid = x.indexrelid
            JOIN pg_class t ON t.oid = x.indrelid
            JOIN pg_am a ON a.oid = c.relam
            WHERE a.amname = 'brin'
              AND (t.oid = 'events'::regclass OR t.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'events'::regclass))
            ORDER BY 1
            """
        ).rows.map { (try $0.decode(String.self, at: 0), try $0.decode(String.self, at: 1)) }
        let partitions = try await pool.query("SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass").scalar(Int.self)
        #expect(indexes.count == partitions + 1)
        for (table, options) in indexes { #expect(options.contains("autosummarize=on"), "\(table): \(options)") }
        await pool.close()
        try await db.drop()
    }

    @Test("the log refuses UPDATE, DELETE and TRUNCATE")
    func appendOnly() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        try await pool.query(
            """
            INSERT INTO events (app, type, message_id, event, anonymous_id, "timestamp", received_at)
            VALUES ('yoked', 'track', 'm1', 'onboarding_started', 'a1', now(), now())
            """)
        for statement in ["UPDATE events SET event = 'x'", "DELETE FROM events", "TRUNCATE events"] {
            let error = await #expect(throws: PostgresError.self) { try await pool.query(statement) }
            #expect(error?.message.contains("append-only") == true, "\(statement)")
        }
        #expect(try await pool.query("SELECT event FROM events").scalar(String.self) == "onboarding_started")
        await pool.close()
        try await db.drop()
    }

    @Test("the dedupe ledger keeps (app, message_id) unique with no time window")
    func dedupeLedger() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        try await pool.query("INSERT INTO event_ids VALUES ('yoked', 'm1', 1, now() - interval '400 days')")
        let again = try await pool.query(
            "INSERT INTO event_ids VALUES ('yoked', 'm1', 2, now()) ON CONFLICT DO NOTHING RETURNING seq")
        #expect(again.rows.isEmpty)
        let otherApp = try await pool.query(
            "INSERT INTO event_ids VALUES ('ops', 'm1', 3, now()) ON CONFLICT DO NOTHING RETURNING seq")
        #expect(otherApp.rows.count == 1)
        await pool.close()
        try await db.drop()
    }
}
