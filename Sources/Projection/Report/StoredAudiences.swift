public import LibPQ

/// The audiences as the last run left them (`onramp audiences list|show|export`),
/// read through the `analytics` views analysts read, so a login sees only
/// the apps it is granted. Reads; writes nothing.
public enum StoredAudiences {
    public struct Summary: Sendable, Equatable, Codable {
        public var audience: String
        public var app: String
        public var unit: String
        public var definition: String
        public var members: Int
        /// Microseconds since the Unix epoch.
        public var builtAt: Int64
    }

    public struct Member: Sendable, Equatable {
        /// The person's id, or the group's.
        public var id: String
        public var isGroup: Bool
        public var enteredAt: Int64
    }

    public struct Change: Sendable, Equatable, Codable {
        public var id: String
        public var change: String
        public var at: Int64
    }

    public struct Day: Sendable, Equatable, Codable {
        public var day: String
        public var entered: Int
        public var left: Int
        public var members: Int
    }

    /// Every audience the last run kept, by name.
    public static func list(_ c: Connection) throws -> [Summary] {
        try c.query(
            """
            SELECT audience, app, unit, definition, members, (extract(epoch FROM built_at) * 1000000)::int8
            FROM analytics.audiences ORDER BY audience COLLATE "C"
            """
        ).rows.map { row in
            Summary(
                audience: try row.decode(String.self, at: 0), app: try row.decode(String.self, at: 1), unit: try row.decode(String.self, at: 2),
                definition: try row.decode(String.self, at: 3), members: try row.decode(Int.self, at: 4), builtAt: try row.decode(Int64.self, at: 5))
        }
    }

    /// Hands each member of `audience` to `body` as the rows come, the
    /// latest to enter first, ties by id; returns how many there were.
    @discardableResult
    public static func forEachMember(_ c: Connection, audience: String, _ body: (Member) throws -> Void) throws -> Int {
        var count = 0
        try c.forEachRow(
            """
            SELECT coalesce(person_id, group_id), group_id IS NOT NULL, (extract(epoch FROM entered_at) * 1000000)::int8
            FROM analytics.audience_members WHERE audience = $1
            ORDER BY entered_at DESC, coalesce(person_id, group_id) COLLATE "C"
            """, [.text(audience)]
        ) { row in
            try body(Member(id: row.text(at: 0) ?? "", isGroup: try row.decode(Bool.self, at: 1), enteredAt: try row.decode(Int64.self, at: 2)))
            count += 1
        }
        return count
    }

    /// The latest `limit` changes of `audience`, the newest first.
    public static func changes(_ c: Connection, audience: String, limit: Int) throws -> [Change] {
        try c.query(
            """
            SELECT coalesce(person_id, group_id), change, (extract(epoch FROM at) * 1000000)::int8
            FROM analytics.audience_changes WHERE audience = $1 ORDER BY at DESC, id DESC LIMIT $2
            """, [.text(audience), .int(Int64(limit))]
        ).rows.map { row in
            Change(id: try row.decode(String.self, at: 0), change: try row.decode(String.self, at: 1), at: try row.decode(Int64.self, at: 2))
        }
    }

    /// Per day of the audience's zone, the last `limit` days with a change, the newest first.
    public static func days(_ c: Connection, audience: String, limit: Int) throws -> [Day] {
        try c.query(
            """
            SELECT day::text, entered, "left", members FROM analytics.audience_daily WHERE audience = $1 ORDER BY day DESC LIMIT $2
            """, [.text(audience), .int(Int64(limit))]
        ).rows.map { row in
            Day(day: try row.decode(String.self, at: 0), entered: try row.decode(Int.self, at: 1), left: try row.decode(Int.self, at: 2),
                members: try row.decode(Int.self, at: 3))
        }
    }
}
