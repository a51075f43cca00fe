import Foundation
import LibPQ
import Simulation

/// Appends generated history straight into the log with COPY (no HTTP, no
/// JSON parsing), ledger included, in chunks so memory stays flat.
enum LogWriter {
    /// Writes the events of the history `count`, `from`, `to`, `seed` and
    /// `laterUse` give whose time is in `kept` (all when nil), received at
    /// `receivedAt` (default `to`): the same history cut at a time gives a
    /// log and the day after it, with the everyday use of earlier devices
    /// in that day, as a live app's log has. Returns the events written.
    @discardableResult
    static func append(
        _ c: Connection, count: Int, from: Date, to: Date, seed: UInt64, prefix: String, laterUse: LaterUse = LaterUse(),
        kept: Range<Date>? = nil, receivedAt: Date? = nil
    ) throws -> Int {
        let received = receivedAt ?? to
        let receivedAt = PostgresValue.timestamp(received)
        let keptMicroseconds = kept.map { Int64($0.lowerBound.timeIntervalSince1970 * 1_000_000)..<Int64($0.upperBound.timeIntervalSince1970 * 1_000_000) }
        var written = 0
        try c.transaction { c in
            try c.copyIn(
                """
                COPY events (app, type, message_id, event, anonymous_id, user_id, "timestamp", original_timestamp,
                             received_at, properties, context, traits, group_id) FROM STDIN
                """
            ) { writer in
                try HistoryGenerator.generate(
                    count: count, from: from, to: to, seed: seed, devicePrefix: prefix, laterUse: laterUse
                ) { e in
                    if let keptMicroseconds, !keptMicroseconds.contains(e.timestamp) { return }
                    written += 1
                    let traits = e.type == "identify" || e.type == "group"  // traits, not properties
                    try writer.writeRow([
                        .text(e.app), .text(e.type), .text(e.messageId), .optional(e.event), .text(e.anonymousId),
                        .optional(e.userId), .microseconds(e.timestamp), .microseconds(e.timestamp), receivedAt,
                        .text(traits ? "{}" : e.properties), .text(e.context), traits ? .text(e.properties) : .null, .optional(e.groupId),
                    ])
                }
            }
            try c.query(
                """
                INSERT INTO event_ids (app, message_id, seq, received_at)
                SELECT app, message_id, seq, received_at FROM events WHERE message_id LIKE $1 AND received_at = $2
                """, [.text(prefix + "-%"), receivedAt])
        }
        return written
    }
}
