import LibPQ

/// The persons an incremental run recomputes, in temp tables for the readers:
/// `touched(app, person)` and `touched_keys(app, id)` (every user id and
/// anonymous id whose events belong to a touched person).
enum TouchedPersons {
    static func collect(
        _ c: Connection, apps: [String], since checkpoint: Checkpoint, relinks: [IdentityLinker.Relink]
    ) throws -> [String: Set<String>] {
        try c.executeScript(
            """
            CREATE TEMP TABLE touched (app text, person text, PRIMARY KEY (app, person)) ON COMMIT DROP;
            CREATE TEMP TABLE touched_keys (app text, id text, PRIMARY KEY (app, id)) ON COMMIT DROP;
            """)
        // Persons with new events (identity already updated for them): the
        // day's distinct keys first, then each anonymous key's link looked up,
        // so the cost follows the day and not all the links of the history.
        try c.query(
            """
            INSERT INTO touched
            SELECT k.app, COALESCE(
                k.user_id,
                (SELECT l.user_id FROM identity_links l WHERE l.app = k.app AND l.anonymous_id = k.anonymous_id),
                k.anonymous_id)
            FROM (
                SELECT e.app, e.user_id, CASE WHEN e.user_id IS NULL THEN e.anonymous_id END AS anonymous_id
                FROM events e
                WHERE \(Checkpoint.newEventsCondition) AND e.app = ANY($4)
                GROUP BY 1, 2, 3
            ) k
            ON CONFLICT DO NOTHING
            """, checkpoint.parameters + [.textArray(apps)])
        // Persons who lost an anonymous id to a (new or earlier) user.
        if !relinks.isEmpty {
            try c.query(
                "INSERT INTO touched SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING",
                [.textArray(relinks.map(\.app)), .textArray(relinks.map(\.previousPerson))])
        }
        // Persons whose window was still open last time: their state may have changed with the clock alone.
        try c.query(
            "INSERT INTO touched SELECT DISTINCT app, person_id FROM funnel_persons WHERE in_progress ON CONFLICT DO NOTHING")
        try c.executeScript(
            """
            INSERT INTO touched_keys SELECT app, person FROM touched ON CONFLICT DO NOTHING;
            INSERT INTO touched_keys
                SELECT l.app, l.anonymous_id FROM touched t
                CROSS JOIN LATERAL (SELECT * FROM identity_links l WHERE l.app = t.app AND l.user_id = t.person OFFSET 0) l
                ON CONFLICT DO NOTHING;
            ANALYZE touched; ANALYZE touched_keys;
            """)
        var result: [String: Set<String>] = [:]
        for row in try c.query("SELECT app, person FROM touched").rows {
            result[try row.decode(String.self, at: 0), default: []].insert(try row.decode(String.self, at: 1))
        }
        return result
    }
}
