import Funnels
import LibPQ

/// Keeps `identity_links` (anonymous id -> earliest user id) up to date from the
/// events written since a checkpoint, and says which persons lost events by a relink.
enum IdentityLinker {
    struct Relink: Hashable {
        let app: String
        let anonymousId: String
        /// The person the anonymous id's events belonged to before (itself, or the old user).
        let previousPerson: String
    }

    static func update(_ c: Connection, apps: [String], since checkpoint: Checkpoint) throws -> [Relink] {
        var observations: [String: [String: IdentityLink]] = [:]  // app -> anonymousId -> best link in range
        try c.forEachRow(
            """
            SELECT e.app, e.anonymous_id, e.user_id, (extract(epoch FROM e."timestamp") * 1000000)::int8
            FROM events e
            WHERE \(Checkpoint.newEventsCondition) AND e.app = ANY($4)
              AND e.anonymous_id IS NOT NULL AND e.user_id IS NOT NULL
            """, checkpoint.parameters + [.textArray(apps)]
        ) { row in
            let app = try row.decode(String.self, at: 0)
            let observation = IdentityObservation(
                anonymousId: try row.decode(String.self, at: 1), userId: try row.decode(String.self, at: 2),
                timestamp: try row.decode(Int64.self, at: 3))
            _ = IdentityResolver.record(observation, into: &observations[app, default: [:]])
        }
        var relinks: [Relink] = []
        for (app, candidates) in observations {
            let anonymousIds = Array(candidates.keys)
            var existing: [String: IdentityLink] = [:]
            for row in try c.query(
                """
                SELECT anonymous_id, user_id, (extract(epoch FROM first_seen) * 1000000)::int8
                FROM identity_links WHERE app = $1 AND anonymous_id = ANY($2)
                """, [.text(app), .textArray(anonymousIds)]
            ).rows {
                existing[try row.decode(String.self, at: 0)] = IdentityLink(
                    userId: try row.decode(String.self, at: 1), firstSeen: try row.decode(Int64.self, at: 2))
            }
            for (anonymousId, candidate) in candidates {
                let current = existing[anonymousId]
                if let current, !candidate.isPreferred(over: current) { continue }
                try c.query(
                    """
                    INSERT INTO identity_links (app, anonymous_id, user_id, first_seen) VALUES ($1, $2, $3, $4)
                    ON CONFLICT (app, anonymous_id) DO UPDATE SET user_id = excluded.user_id, first_seen = excluded.first_seen
                    """,
                    [.text(app), .text(anonymousId), .text(candidate.userId), .microseconds(candidate.firstSeen)])
                if current?.userId != candidate.userId {
                    relinks.append(Relink(app: app, anonymousId: anonymousId, previousPerson: current?.userId ?? anonymousId))
                }
            }
        }
        return relinks
    }
}
