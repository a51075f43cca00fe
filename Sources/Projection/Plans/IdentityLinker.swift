import Funnels
import LibPQ

/// Keeps `identity_links` (anonymous id -> earliest user id) up to date from the
/// events written since a checkpoint, and says which persons lost events by a
/// relink. The order is `IdentityLink.isPreferred(over:)`'s: earliest sighting,
/// then the smallest user id, compared as bytes (`COLLATE "C"`, which is how
/// Swift orders normalised strings), so the SQL of an incremental run and the
/// engine's `IdentityResolver` of a rebuild agree (tests compare the two).
enum IdentityLinker {
    struct Relink: Hashable {
        let app: String
        let anonymousId: String
        /// The person the anonymous id's events belonged to before (itself, or the old user).
        let previousPerson: String
    }

    /// Stores the new events' links (`NewEvents.links`) where they win over
    /// the stored ones; returns the anonymous ids that changed hands. Each
    /// candidate's stored link is looked up by its key, so the cost follows
    /// the day and not all the links of the history, or, when the candidates
    /// are many against the stored links, by one scan of them
    /// (`PersonActivity.Lookup`).
    static func update(_ c: Connection, newLinks: [String: [String: IdentityLink]], byScan: Bool) throws -> [Relink] {
        try c.executeScript(
            "CREATE TEMP TABLE link_candidates (app text, anonymous_id text, user_id text, first_seen timestamptz) ON COMMIT DROP")
        try c.copyIn("COPY link_candidates FROM STDIN") { writer in
            // Key by key, in index order, as `TouchedPersons.sorted` says why.
            for (app, links) in byScan ? Array(newLinks) : newLinks.sorted(by: { $0.key < $1.key }) {
                for (anonymousId, link) in byScan ? Array(links) : links.sorted(by: { $0.key < $1.key }) {
                    try writer.writeRow([.text(app), .text(anonymousId), .text(link.userId), .microseconds(link.firstSeen)])
                }
            }
        }
        // By key: LATERAL, kept apart by OFFSET 0, one probe per candidate.
        // By scan: the links fenced off by OFFSET 0, so nothing can probe them.
        let stored = byScan
            ? """
              LEFT JOIN (SELECT app, anonymous_id, user_id, first_seen FROM identity_links OFFSET 0) l
                ON l.app = c.app AND l.anonymous_id = c.anonymous_id
              """
            : """
              LEFT JOIN LATERAL (
                  SELECT * FROM identity_links l WHERE l.app = c.app AND l.anonymous_id = c.anonymous_id OFFSET 0) l ON true
              """
        let rows = try c.query(
            """
            WITH changed AS (
                SELECT c.*, l.user_id AS old_user
                FROM link_candidates c
                \(stored)
                WHERE l.user_id IS NULL OR (c.first_seen, c.user_id COLLATE "C") < (l.first_seen, l.user_id COLLATE "C")
            ), written AS (
                INSERT INTO identity_links (app, anonymous_id, user_id, first_seen)
                SELECT app, anonymous_id, user_id, first_seen FROM changed
                ON CONFLICT (app, anonymous_id) DO UPDATE SET user_id = excluded.user_id, first_seen = excluded.first_seen
            )
            SELECT app, anonymous_id, COALESCE(old_user, anonymous_id) FROM changed
            WHERE old_user IS DISTINCT FROM user_id
            """)
        return try rows.rows.map { row in
            Relink(
                app: try row.decode(String.self, at: 0), anonymousId: try row.decode(String.self, at: 1),
                previousPerson: try row.decode(String.self, at: 2))
        }
    }

    /// A rebuild's links for one app, from scratch: each (anonymous id, user
    /// id) pair's first sighting streams out unsorted (a hash aggregate: a
    /// pair's best observation is its earliest, so the winner over pairs is
    /// the winner over events) and the engine's `IdentityResolver` keeps each
    /// anonymous id's winner. In SQL this would be a sort of every identified
    /// event, a large share of a rebuild's database time. Returns the links
    /// stored (anonymous id -> link), for the history read that follows.
    /// Reads on `reads`, stores on `c` (the two may be one session).
    static func rebuild(reading reads: Connection, writing c: Connection, app: String) throws -> [String: IdentityLink] {
        try ReadScope.bind(reads, app: app, paths: [])
        var links: [String: IdentityLink] = [:]
        var fields: [String?] = []
        try reads.copyOut(
            """
            COPY (SELECT anonymous_id, user_id, min("timestamp") FROM events
                  WHERE app = \(ReadScope.app) AND anonymous_id IS NOT NULL AND user_id IS NOT NULL
                  GROUP BY anonymous_id, user_id) TO STDOUT
            """
        ) { line in
            CopyText.fields(of: line, into: &fields)
            guard fields.count == 3, let time = fields[2], let timestamp = Timestamps.parse(time) else {
                throw PostgresError(.unexpectedResult, message: "unreadable identified event for app \(app): \(fields)")
            }
            IdentityResolver.record(IdentityObservation(anonymousId: fields[0], userId: fields[1], timestamp: timestamp), into: &links)
        }
        try c.copyIn("COPY identity_links (app, anonymous_id, user_id, first_seen) FROM STDIN") { writer in
            for (anonymousId, link) in links {
                try writer.writeRow([.text(app), .text(anonymousId), .text(link.userId), .microseconds(link.firstSeen)])
            }
        }
        return links
    }
}
