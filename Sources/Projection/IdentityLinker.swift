import Funnels
import LibPQ

/// Keeps `identity_links` (anonymous id -> earliest user id) up to date from the
/// events written since a checkpoint, and says which persons lost events by a
/// relink. Set-based in SQL so a rebuild over millions of events is one pass;
/// the order is `IdentityLink.isPreferred(over:)`'s: earliest sighting, then the
/// smallest user id (tests compare the table with `IdentityResolver`).
enum IdentityLinker {
    struct Relink: Hashable {
        let app: String
        let anonymousId: String
        /// The person the anonymous id's events belonged to before (itself, or the old user).
        let previousPerson: String
    }

    /// `relinks: false` when the caller recomputes everyone anyway (a rebuild):
    /// then every link would come back as a relink, for nothing.
    static func update(_ c: Connection, apps: [String], since checkpoint: Checkpoint, relinks: Bool = true) throws -> [Relink] {
        let rows = try c.query(
            """
            WITH candidates AS (
                SELECT DISTINCT ON (e.app, e.anonymous_id) e.app, e.anonymous_id, e.user_id, e."timestamp"
                FROM events e
                WHERE \(Checkpoint.newEventsCondition) AND e.app = ANY($4)
                  AND e.anonymous_id IS NOT NULL AND e.user_id IS NOT NULL
                ORDER BY e.app, e.anonymous_id, e."timestamp", e.user_id
            ), changed AS (
                SELECT c.*, l.user_id AS old_user
                FROM candidates c
                LEFT JOIN identity_links l ON l.app = c.app AND l.anonymous_id = c.anonymous_id
                WHERE l.user_id IS NULL OR (c."timestamp", c.user_id) < (l.first_seen, l.user_id)
            ), written AS (
                INSERT INTO identity_links (app, anonymous_id, user_id, first_seen)
                SELECT app, anonymous_id, user_id, "timestamp" FROM changed
                ON CONFLICT (app, anonymous_id) DO UPDATE SET user_id = excluded.user_id, first_seen = excluded.first_seen
            )
            SELECT app, anonymous_id, COALESCE(old_user, anonymous_id) FROM changed
            WHERE old_user IS DISTINCT FROM user_id AND $5
            """, checkpoint.parameters + [.textArray(apps), .bool(relinks)])
        return try rows.rows.map { row in
            Relink(
                app: try row.decode(String.self, at: 0), anonymousId: try row.decode(String.self, at: 1),
                previousPerson: try row.decode(String.self, at: 2))
        }
    }
}
