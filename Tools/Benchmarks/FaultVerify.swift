public import Foundation
import LibPQ

/// Compares the fault clients' ledgers with the event log (`scripts/faults`).
///
/// Every acknowledged message must be stored exactly once, in `events` and in
/// the `event_ids` ledger; a message only sent (its batch given up after the
/// drain timeout) may or may not be stored, but nothing may be stored that no
/// client sent.
public enum FaultVerify {
    public struct Report: Sendable, Codable {
        public var acknowledged: Int
        public var sentNeverAcknowledged: Int
        public var stored: Int
        /// Acknowledged but not in `events`.
        public var lost: Int
        /// Extra copies in `events` of one `(app, messageId)`.
        public var duplicated: Int
        /// In `events` but never sent by any client.
        public var phantom: Int
        /// `event_ids` rows without their event, or events without their ledger row.
        public var ledgerMismatches: Int
        public var ok: Bool { lost == 0 && duplicated == 0 && phantom == 0 && ledgerMismatches == 0 }
    }

    /// Reads every `sent-<prefix>-*.tsv` and `acked-<prefix>-*.tsv` in `ledgerDirectory`.
    public static func run(databaseURL: String, ledgerDirectory: URL, idPrefix: String) async throws -> Report {
        let files = try FileManager.default.contentsOfDirectory(atPath: ledgerDirectory.path)
        func lines(_ kind: String) throws -> [(String, String)] {
            var out: [(String, String)] = []
            for file in files where file.hasPrefix("\(kind)-\(idPrefix)-") && file.hasSuffix(".tsv") {
                let text = try String(contentsOf: ledgerDirectory.appendingPathComponent(file), encoding: .utf8)
                for line in text.split(separator: "\n") {
                    let parts = line.split(separator: "\t", maxSplits: 1)
                    if parts.count == 2 { out.append((String(parts[0]), String(parts[1]))) }
                }
            }
            return out
        }
        let sent = try lines("sent")
        let acked = try lines("acked")
        let pool = ConnectionPool(url: databaseURL, maxConnections: 1)
        let pattern = idPrefix + "-%"
        let result: Result<Report, any Error>
        do {
            result = .success(
                try await pool.withConnection { c in
                    try c.executeScript(
                        """
                        CREATE TEMP TABLE fault_sent (app text, message_id text);
                        CREATE TEMP TABLE fault_acked (app text, message_id text);
                        """)
                    for (table, rows) in [("fault_sent", sent), ("fault_acked", acked)] {
                        _ = try c.copyIn("COPY \(table) (app, message_id) FROM STDIN") { writer in
                            for (app, id) in rows { try writer.writeRow([.text(app), .text(id)]) }
                        }
                    }
                    try c.executeScript(
                        """
                        CREATE TEMP TABLE fault_events AS
                            SELECT app, message_id, count(*) AS copies FROM events
                            WHERE message_id LIKE '\(pattern)' GROUP BY app, message_id;
                        CREATE TEMP TABLE fault_ids AS
                            SELECT app, message_id FROM event_ids WHERE message_id LIKE '\(pattern)';
                        ANALYZE fault_sent; ANALYZE fault_acked; ANALYZE fault_events; ANALYZE fault_ids;
                        """)
                    func count(_ sql: String) throws -> Int { try c.query(sql).scalar(Int.self) }
                    let acknowledged = try count("SELECT count(*) FROM (SELECT DISTINCT app, message_id FROM fault_acked) a")
                    let sentOnly = try count(
                        """
                        SELECT count(*) FROM (SELECT DISTINCT app, message_id FROM fault_sent) s
                        WHERE NOT EXISTS (SELECT 1 FROM fault_acked a WHERE a.app = s.app AND a.message_id = s.message_id)
                        """)
                    let stored = try count("SELECT coalesce(sum(copies), 0)::bigint FROM fault_events")
                    let lost = try count(
                        """
                        SELECT count(*) FROM (SELECT DISTINCT app, message_id FROM fault_acked) a
                        WHERE NOT EXISTS (SELECT 1 FROM fault_events e WHERE e.app = a.app AND e.message_id = a.message_id)
                        """)
                    let duplicated = try count("SELECT coalesce(sum(copies - 1), 0)::bigint FROM fault_events WHERE copies > 1")
                    let phantom = try count(
                        """
                        SELECT count(*) FROM fault_events e
                        WHERE NOT EXISTS (SELECT 1 FROM fault_sent s WHERE s.app = e.app AND s.message_id = e.message_id)
                        """)
                    let mismatches = try count(
                        """
                        SELECT (SELECT count(*) FROM fault_ids i WHERE NOT EXISTS
                                   (SELECT 1 FROM fault_events e WHERE e.app = i.app AND e.message_id = i.message_id))
                             + (SELECT count(*) FROM fault_events e WHERE NOT EXISTS
                                   (SELECT 1 FROM fault_ids i WHERE i.app = e.app AND i.message_id = e.message_id))
                        """)
                    return Report(
                        acknowledged: acknowledged, sentNeverAcknowledged: sentOnly, stored: stored, lost: lost, duplicated: duplicated,
                        phantom: phantom, ledgerMismatches: mismatches)
                })
        } catch {
            result = .failure(error)
        }
        await pool.close()
        return try result.get()
    }
}
