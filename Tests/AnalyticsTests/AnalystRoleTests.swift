import Foundation
import LibPQ
import Testing

/// `onramp_analyst` reads `analytics` and nothing else, and cannot write.
@Suite("the analyst role")
struct AnalystRoleTests {
    @Test(
        "internal tables are refused",
        arguments: ["events", "event_ids", "write_keys", "quarantine", "funnel_persons", "identity_links", "funnel_tallies", "funnel_person_diagnostics", "funnel_driver_counts", "funnel_regressions",
                    "projection_checkpoint", "onramp_schema_migrations", "public.events_default", "privacy_key", "privacy_requests",
                    "suppressed_ids", "erased_messages", "privacy_pending"])
    func internalTablesRefused(_ table: String) async throws {
        let session = try await AnalystSession.make()
        let error = await #expect(throws: PostgresError.self) {
            try await session.analyst.query("SELECT count(*) FROM public.\(table.replacingOccurrences(of: "public.", with: ""))")
        }
        #expect(error?.sqlState == SQLState.insufficientPrivilege, "\(table): \(String(describing: error))")
        try await session.close()
    }

    @Test("writes are refused, even to analytics views, and the session is read-only with a timeout")
    func writesRefused() async throws {
        let session = try await AnalystSession.make()
        let analyst = session.analyst
        for statement in [
            "INSERT INTO public.events (app, type, message_id, anonymous_id, \"timestamp\", received_at) VALUES ('x', 'track', 'm', 'a', now(), now())",
            "DELETE FROM analytics.funnel_persons",
            "UPDATE analytics.funnel_cohorts SET started = 0",
            "CREATE TABLE analytics.mine (x int)",
            "CREATE TABLE public.mine (x int)",
            "SELECT public.onramp_ensure_event_partitions(0, 12)",
        ] {
            let error = await #expect(throws: PostgresError.self, "\(statement)") { try await analyst.query(statement) }
            // 55000: a view of two branches (analytics.funnel_persons) is no table to write to at all.
            #expect(
                [SQLState.insufficientPrivilege, SQLState.readOnlyTransaction, "55000"].contains(error?.sqlState ?? ""),
                "\(statement): \(String(describing: error))")
        }
        #expect(try await analyst.query("SHOW statement_timeout").scalar(String.self) == "1min")
        #expect(try await analyst.query("SHOW default_transaction_read_only").scalar(String.self) == "on")
        // What the analyst can read is there and filled.
        for view in ["events", "funnel_persons", "funnel_daily", "funnel_cohorts", "funnel_steps"] {
            #expect(try await analyst.query("SELECT count(*) FROM analytics.\(view)").scalar(Int.self) > 0, "\(view)")
        }
        // The person view merges devices: nothing here is written with a user id, so person = anonymous id.
        #expect(try await analyst.query("SELECT count(*) FROM analytics.events WHERE person_id IS NULL").scalar(Int.self) == 0)
        try await session.close()
    }
}
