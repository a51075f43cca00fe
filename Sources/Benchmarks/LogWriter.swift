import Foundation
import LibPQ
import Simulation

/// Appends generated history straight into the log with COPY (no HTTP, no
/// JSON parsing), ledger included, in chunks so memory stays flat.
enum LogWriter {
    @discardableResult
    static func append(_ c: Connection, count: Int, from: Date, to: Date, seed: UInt64, prefix: String) throws -> Int {
        let receivedAt = PostgresValue.timestamp(to)
        var written = 0
        try c.transaction { c in
            try c.copyIn(
                """
                COPY events (app, type, message_id, event, anonymous_id, user_id, "timestamp", original_timestamp,
                             received_at, properties, context) FROM STDIN
                """
            ) { writer in
                written = try HistoryGenerator.generate(count: count, from: from, to: to, seed: seed, devicePrefix: prefix) { e in
                    try writer.writeRow([
                        .text(e.app), .text(e.type), .text(e.messageId), .optional(e.event), .text(e.anonymousId),
                        .optional(e.userId), .microseconds(e.timestamp), .microseconds(e.timestamp), receivedAt,
                        .text(e.properties), .text(e.context),
                    ])
                }
            }
            try c.query(
                """
                INSERT INTO event_ids (app, message_id, seq, received_at)
                SELECT app, message_id, seq, received_at FROM events WHERE message_id LIKE $1
                """, [.text(prefix + "-%")])
        }
        return written
    }
}
