import LibPQ

/// The persons an incremental run recomputes, in temp tables for the readers:
/// `touched(app, person)` and `touched_keys(app, id)` (every user id and
/// anonymous id whose events belong to a touched person).
enum TouchedPersons {
    static func collect(_ c: Connection, day: NewEvents, relinks: [IdentityLinker.Relink]) throws -> [String: Set<String>] {
        try c.executeScript(
            """
            CREATE TEMP TABLE touched (app text, person text, PRIMARY KEY (app, person)) ON COMMIT DROP;
            CREATE TEMP TABLE touched_keys (app text, id text, PRIMARY KEY (app, id)) ON COMMIT DROP;
            CREATE TEMP TABLE new_anonymous (app text, id text) ON COMMIT DROP;
            """)
        // Persons with new events (identity already updated for them): each
        // user id is one; each anonymous id belongs to its linked user, looked
        // up by its key, or is one itself.
        try c.copyIn("COPY touched FROM STDIN") { writer in
            for key in day.users { try writer.writeRow([.text(key.app), .text(key.id)]) }
        }
        try c.copyIn("COPY new_anonymous FROM STDIN") { writer in
            for key in day.anonymous { try writer.writeRow([.text(key.app), .text(key.id)]) }
        }
        try c.query(
            """
            INSERT INTO touched
            SELECT a.app, COALESCE((SELECT l.user_id FROM identity_links l WHERE l.app = a.app AND l.anonymous_id = a.id), a.id)
            FROM new_anonymous a
            ON CONFLICT DO NOTHING
            """)
        // Persons who lost an anonymous id to a (new or earlier) user, if they
        // have outcomes stored: losing events cannot make a person enter a
        // funnel. Most relinks are a new device's first sign-in, whose
        // anonymous self never had any.
        if !relinks.isEmpty {
            try c.query(
                """
                INSERT INTO touched
                SELECT r.app, r.person FROM unnest($1::text[], $2::text[]) AS r(app, person)
                WHERE EXISTS (SELECT 1 FROM funnel_persons f WHERE f.app = r.app AND f.person_id = r.person)
                ON CONFLICT DO NOTHING
                """,
                [.textArray(relinks.map(\.app)), .textArray(relinks.map(\.previousPerson))])
        }
        // Persons in progress last time whose window's end was not stored
        // (rows from before migration 006): their state may have changed with
        // the clock alone. The others' windows are closed in place
        // (`OutcomeStore.closeWindows`).
        try c.query(
            """
            INSERT INTO touched SELECT DISTINCT app, person_id FROM funnel_persons WHERE in_progress AND open_until IS NULL
            ON CONFLICT DO NOTHING
            """)
        try c.executeScript(
            """
            INSERT INTO touched_keys SELECT app, person FROM touched ON CONFLICT DO NOTHING;
            INSERT INTO touched_keys
                SELECT l.app, l.anonymous_id FROM touched t
                CROSS JOIN LATERAL (SELECT * FROM identity_links l WHERE l.app = t.app AND l.user_id = t.person OFFSET 0) l
                ON CONFLICT DO NOTHING;
            """)
        var result: [String: Set<String>] = [:]
        for row in try c.query("SELECT app, person FROM touched").rows {
            result[try row.decode(String.self, at: 0), default: []].insert(try row.decode(String.self, at: 1))
        }
        return result
    }
}
