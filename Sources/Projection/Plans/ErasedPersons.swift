import LibPQ

/// Persons an erasure took out of the log (docs/privacy.md), waiting in
/// `privacy_pending` for a run to take them out of the projection too. An
/// incremental run recomputes them as it does persons with new events:
/// with no events left, their rows go, and every day that counted them is
/// counted again. Every run then forgets them, in its own transaction.
enum ErasedPersons {
    /// The pending persons of `apps`, as keys the run recomputes.
    static func pending(_ c: Connection, apps: [String]) throws -> Set<NewEvents.Key> {
        var keys = Set<NewEvents.Key>()
        for row in try c.query("SELECT app, person_id FROM privacy_pending WHERE app = ANY($1::text[])", [.textArray(apps)]).rows {
            keys.insert(NewEvents.Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1)))
        }
        return keys
    }

    /// The apps with pending persons: their counts of events are out of date.
    static func apps(_ c: Connection) throws -> [String] {
        try c.query("SELECT DISTINCT app FROM privacy_pending ORDER BY app").rows.map { try $0.decode(String.self, at: 0) }
    }

    /// Forgets the pending persons the run saw (a rebuild recomputed
    /// everyone), their requests complete: an erasure cut short before its
    /// run is finished by the next.
    static func forget(_ c: Connection) throws {
        try c.query(
            """
            WITH done AS (DELETE FROM privacy_pending RETURNING request_id)
            UPDATE privacy_requests SET completed_at = now() WHERE completed_at IS NULL AND id IN (SELECT request_id FROM done)
            """)
    }
}
