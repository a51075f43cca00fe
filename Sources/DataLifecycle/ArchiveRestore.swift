import EventLog
import Foundation
public import LibPQ

/// An archived month's messages appended back to the log (docs/lifecycle.md).
/// A message is inserted unless it is in the log already, so restoring twice,
/// or while servers ingest, adds nothing twice. The server's own append
/// would refuse every one (the dedupe ledger keeps archived messages' ids),
/// so the restore inserts as the owner, leaving out every message an erasure
/// took (by its keyed hash among the erased messages') or whose ids are
/// suppressed, so nothing erased comes back. Restored rows keep their
/// `message_id`, `timestamp` and `received_at` and get a new `seq` and
/// transaction id: the next run reads them as new and recomputes the persons.
/// One transaction: killed, it restores nothing, and a rerun restores all.
public struct ArchiveRestore: Sendable {
    /// YYYY-MM.
    public var month: String
    public var directory: String
    /// Only these apps' files; nil: all.
    public var apps: Set<String>?

    public init(month: String, directory: String, apps: Set<String>? = nil) {
        self.month = month
        self.directory = directory
        self.apps = apps
    }

    public struct Outcome: Sendable, Equatable {
        public var month: String
        /// Messages the files hold (of the apps restored).
        public var archived: Int
        public var restored: Int
        /// Already in the log.
        public var present: Int
        /// Erased or suppressed since they were archived.
        public var keptOut: Int
    }

    public func run(_ c: Connection, lockTimeout: String = "10s") throws -> Outcome {
        guard let (from, until) = MonthArchive.bounds(of: month) else { throw ArchiveError.refused("--month: expected YYYY-MM (got '\(month)')") }
        let (manifest, _) = try ArchiveManifest.load(directory: directory, month: month)
        guard manifest.month == month else {
            throw ArchiveError.damaged("\(directory)/\(month)/\(ArchiveManifest.fileName)", "it is the manifest of \(manifest.month)")
        }
        let files = manifest.files.filter { apps?.contains($0.app) ?? true }
        if let apps, let missing = apps.subtracting(manifest.files.map(\.app)).sorted().first {
            throw ArchiveError.refused("--app: the archive of \(month) holds no message of app '\(missing)'")
        }
        try manifest.verify(directory: directory, apps: apps)
        return try c.transaction { c in
            try c.query("SELECT set_config('lock_timeout', $1, true)", [.text(lockTimeout)])
            try c.query("SELECT pg_advisory_xact_lock(hashtext('onramp archive restore'))")
            do {
                try c.query("SELECT onramp_create_month_partition($1::date)", [.text("\(month)-01")])
            } catch {
                throw ArchiveError.refused("--month \(month): its partition cannot be made again (\(error)); nothing was restored")
            }
            // The files' rows go back as they were written out (`ArchiveRow`), read by PostgreSQL itself.
            try c.executeScript(
                """
                SET LOCAL timezone TO 'UTC';
                CREATE TEMPORARY TABLE restored (
                    seq bigint, app text, type text, message_id text, event text, anonymous_id text, user_id text,
                    "timestamp" timestamptz, original_timestamp timestamptz, sent_at timestamptz, received_at timestamptz,
                    properties jsonb, context jsonb, traits jsonb, previous_id text, group_id text) ON COMMIT DROP
                """)
            var archived = 0
            for file in files {
                archived += try c.copyIn("COPY restored FROM STDIN") { writer in
                    try GzipReader.forEachLine("\(directory)/\(month)/\(file.path)") { line in try writer.writeLine(line) }
                }
            }
            // The month's rows only (a file of another month is refused above by its manifest).
            let bounds: [PostgresValue] = [.microseconds(from), .microseconds(until)]
            // What the log holds of the month, read once: on Citus a statement
            // may not join the coordinator's temporary table to the log's shards.
            try c.query(
                """
                CREATE TEMPORARY TABLE restored_present ON COMMIT DROP AS
                SELECT app, message_id FROM events WHERE received_at >= $1 AND received_at < $2
                """, bounds)
            let present = try c.query(
                """
                SELECT count(*) FROM restored r
                WHERE EXISTS (SELECT 1 FROM restored_present p WHERE p.app = r.app AND p.message_id = r.message_id)
                """
            ).scalar(Int.self)
            // On Citus each row names its shard key, as the server's append does (docs/scaling.md).
            let distributed = try EventLogLayout.read(c) == .distributed
            let restored = try c.query(
                """
                INSERT INTO events (app, type, message_id, event, anonymous_id, user_id, "timestamp", original_timestamp, sent_at,
                                    received_at, properties, context, traits, previous_id, group_id\(distributed ? ", person_key" : ""))
                SELECT r.app, r.type, r.message_id, r.event, r.anonymous_id, r.user_id, r."timestamp", r.original_timestamp, r.sent_at,
                       r.received_at, r.properties, r.context, r.traits, r.previous_id,
                       r.group_id\(distributed ? ", coalesce(NULLIF(r.anonymous_id, ''), NULLIF(r.user_id, ''))" : "")
                FROM restored r CROSS JOIN privacy_key k
                WHERE r.received_at >= $1
                  AND r.received_at < $2
                  AND NOT EXISTS (SELECT 1 FROM restored_present p WHERE p.app = r.app AND p.message_id = r.message_id)
                  AND NOT EXISTS (
                      SELECT 1 FROM erased_messages x
                      WHERE x.app = r.app AND x.message_hash = onramp_hmac(k.inner_pad, k.outer_pad, r.app, 'message', r.message_id))
                  AND NOT EXISTS (
                      SELECT 1 FROM suppressed_ids s
                      WHERE s.app = r.app
                        AND s.id_hash IN (onramp_hmac(k.inner_pad, k.outer_pad, r.app, 'user', r.user_id),
                                          onramp_hmac(k.inner_pad, k.outer_pad, r.app, 'anonymous', r.anonymous_id)))
                ORDER BY r.received_at, r.seq
                """, bounds
            ).affectedRows
            // The ledger keeps archived ids; one it lacks (a log filled by hand) gets its row, so a re-sent copy is refused.
            // On one PostgreSQL an anti-join passes over the rows the ledger holds, cheaper than a conflict
            // each; Citus joins no two tables distributed apart, so there each is a conflict.
            try c.query(
                """
                INSERT INTO event_ids (app, message_id, seq, received_at)
                SELECT e.app, e.message_id, e.seq, e.received_at FROM events e
                WHERE e.received_at >= $1
                  AND e.received_at < $2
                  \(distributed ? "" : "AND NOT EXISTS (SELECT 1 FROM event_ids l WHERE l.app = e.app AND l.message_id = e.message_id)")
                ON CONFLICT DO NOTHING
                """, bounds)
            let perApp = Dictionary(files.map { ($0.app, $0.messages) }, uniquingKeysWith: +)
            try c.query(
                """
                INSERT INTO archive_changes (month, app, change, messages)
                SELECT $1::date, a.app, 'restored', a.messages FROM unnest($2::text[], $3::int8[]) AS a(app, messages)
                """, [.text("\(month)-01"), .textArray(perApp.keys.sorted()), .intArray(perApp.keys.sorted().map { Int64(perApp[$0] ?? 0) })])
            if apps == nil || Set(manifest.files.map(\.app)).isSubset(of: apps ?? []) {
                try c.query("DELETE FROM archived_months WHERE month = $1::date", [.text("\(month)-01")])
            }
            return Outcome(month: month, archived: archived, restored: restored, present: present, keptOut: archived - restored - present)
        }
    }
}
