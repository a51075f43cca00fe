public import LibPQ

/// The delivery ledger (`audience_deliveries`, docs/audiences.md,
/// "Delivering"): every change an audience's `deliver` asks for, queued by
/// the run that recorded it, until its receiver answers 2xx or it runs out
/// of attempts. Its row id is the delivery id a receiver drops duplicates by.
public enum DeliveryLedger {
    /// One queued change, as sent.
    public struct Entry: Sendable, Equatable {
        public var id: Int64
        public var app: String
        /// The person's id, or the group's (`isGroup`).
        public var unit: String
        public var isGroup: Bool
        public var change: String
        /// Microseconds since the Unix epoch.
        public var at: Int64
        public var attempts: Int

        /// From `id, app, person_id, change, at (µs), attempts`, starting at column `first`.
        init(_ row: Row, from first: Int = 0) throws {
            let unit = try row.decode(String.self, at: first + 2)
            isGroup = unit.utf8.first == 0x1F
            id = try row.decode(Int64.self, at: first)
            app = try row.decode(String.self, at: first + 1)
            self.unit = isGroup ? String(unit.dropFirst()) : unit
            change = try row.decode(String.self, at: first + 3)
            at = try row.decode(Int64.self, at: first + 4)
            attempts = try row.decode(Int.self, at: first + 5)
        }
    }

    /// Per audience and state, how many, and the last error of the pending and dead.
    public struct Count: Sendable, Equatable, Codable {
        public var audience: String
        public var state: String
        public var count: Int
        public var lastError: String?
    }

    /// Up to `limit` of `audience`'s pending changes due at `now`, in the
    /// order they were recorded, and none while an older one waits for its
    /// next attempt: a receiver sees a unit's enter before its leave.
    public static func due(_ c: Connection, audience: String, now: Int64, limit: Int) throws -> [Entry] {
        var due: [Entry] = []
        for row in try c.query(
            """
            SELECT id, app, person_id, change, (extract(epoch FROM at) * 1000000)::int8, attempts, next_attempt_at <= $2
            FROM audience_deliveries WHERE state = 'pending' AND audience = $1 ORDER BY id LIMIT $3
            """, [.text(audience), .microseconds(now), .int(limit)]
        ).rows {
            guard try row.decode(Bool.self, at: 6) else { break }
            due.append(try Entry(row))
        }
        return due
    }

    /// The receiver took `ids`.
    public static func delivered(_ c: Connection, ids: [Int64], now: Int64) throws {
        try c.query(
            """
            UPDATE audience_deliveries SET state = 'delivered', delivered_at = $2, attempts = attempts + 1, last_error = NULL
            WHERE id = ANY($1::int8[]) AND state = 'pending'
            """, [.intArray(ids), .microseconds(now)])
    }

    /// The receiver did not take `ids`: tried again from `next`, or dead
    /// once `maxAttempts` are spent. Returns how many died.
    @discardableResult
    public static func failed(_ c: Connection, ids: [Int64], reason: String, next: Int64, maxAttempts: Int) throws -> Int {
        try c.query(
            """
            WITH changed AS (
                UPDATE audience_deliveries SET attempts = attempts + 1, last_error = $2, next_attempt_at = $3,
                       state = CASE WHEN attempts + 1 >= $4 THEN 'dead' ELSE 'pending' END
                WHERE id = ANY($1::int8[]) AND state = 'pending'
                RETURNING state)
            SELECT count(*) FILTER (WHERE state = 'dead') FROM changed
            """, [.intArray(ids), .text(reason), .microseconds(next), .int(maxAttempts)]
        ).scalar(Int.self)
    }

    /// The ledger by audience and state.
    public static func counts(_ c: Connection) throws -> [Count] {
        try c.query(
            """
            SELECT audience, state, count(*),
                   (array_agg(last_error ORDER BY next_attempt_at DESC) FILTER (WHERE last_error IS NOT NULL))[1]
            FROM audience_deliveries GROUP BY 1, 2 ORDER BY 1 COLLATE "C", 2
            """
        ).rows.map { row in
            Count(audience: try row.decode(String.self, at: 0), state: try row.decode(String.self, at: 1), count: try row.decode(Int.self, at: 2),
                  lastError: try row.decode(String?.self, at: 3))
        }
    }

    /// The dead-lettered changes, oldest first.
    public static func dead(_ c: Connection, limit: Int) throws -> [(audience: String, entry: Entry, error: String?)] {
        try c.query(
            """
            SELECT audience, id, app, person_id, change, (extract(epoch FROM at) * 1000000)::int8, attempts, last_error
            FROM audience_deliveries WHERE state = 'dead' ORDER BY id LIMIT $1
            """, [.int(limit)]
        ).rows.map { row in (try row.decode(String.self, at: 0), try Entry(row, from: 1), try row.decode(String?.self, at: 7)) }
    }

    /// Puts the dead-lettered changes back in the queue, due at `now`, their attempts reset; returns how many.
    @discardableResult
    public static func retryDead(_ c: Connection, now: Int64) throws -> Int {
        try c.query(
            """
            WITH retried AS (
                UPDATE audience_deliveries SET state = 'pending', attempts = 0, next_attempt_at = $1 WHERE state = 'dead' RETURNING 1)
            SELECT count(*) FROM retried
            """, [.microseconds(now)]
        ).scalar(Int.self)
    }
}
