public import Foundation
import LibPQ

/// The privacy audit trail (`privacy_requests`, no personal data: ids only
/// as keyed hashes) and suppression lifted (docs/privacy.md).
public enum PrivacyRequests {
    /// One row of `onramp privacy list`.
    public struct Entry: Sendable, Codable, Equatable {
        public var id: Int64
        public var kind: String
        public var app: String
        public var requestedAt: Date
        public var requestedBy: String
        public var ids: Int
        public var suppressed: Bool
        public var removed: [String: Int]
        public var completedAt: Date?
    }

    /// Every request, newest first.
    public static func list(_ databaseURL: String) async throws -> [Entry] {
        try await ConnectionPool.using(url: databaseURL) { pool in
            try await pool.query(
                """
                SELECT id, kind, app, requested_at, requested_by, cardinality(id_hashes), suppressed, removed::text, completed_at
                FROM privacy_requests ORDER BY id DESC
                """
            ).rows.map { row in
                Entry(
                    id: try row.decode(Int64.self, at: 0), kind: try row.decode(String.self, at: 1), app: try row.decode(String.self, at: 2),
                    requestedAt: try row.decode(Date.self, at: 3), requestedBy: try row.decode(String.self, at: 4),
                    ids: try row.decode(Int.self, at: 5), suppressed: try row.decode(Bool.self, at: 6),
                    removed: try JSONDecoder().decode([String: Int].self, from: Data(try row.decode(String.self, at: 7).utf8)),
                    completedAt: try row.decode(Date?.self, at: 8))
            }
        }
    }

    /// Lets `userIds` and `anonymousIds` of `app` be stored again; returns
    /// the request id and how many suppressed ids it lifted.
    public static func unsuppress(
        _ databaseURL: String, app: String, userIds: [String], anonymousIds: [String], requestedBy: String
    ) async throws -> (requestId: Int64, lifted: Int) {
        try await ConnectionPool.using(url: databaseURL) { pool in
            try await pool.transaction { c in
                let hashes = """
                    SELECT onramp_keyed_hash($1, 'user', g.id) FROM unnest($2::text[]) AS g(id)
                    UNION ALL SELECT onramp_keyed_hash($1, 'anonymous', g.id) FROM unnest($3::text[]) AS g(id)
                    """
                let parameters: [PostgresValue] = [.text(app), .textArray(userIds), .textArray(anonymousIds)]
                let lifted = try c.query("DELETE FROM suppressed_ids WHERE app = $1 AND id_hash IN (\(hashes))", parameters).affectedRows
                let id = try c.query(
                    """
                    INSERT INTO privacy_requests (kind, app, requested_by, id_hashes, removed, completed_at)
                    VALUES ('unsuppress', $1, $4, array(\(hashes)), jsonb_build_object('suppressed_ids', $5::int), now())
                    RETURNING id
                    """, parameters + [.text(requestedBy), .int(Int64(lifted))]
                ).scalar(Int64.self)
                return (id, lifted)
            }
        }
    }
}
