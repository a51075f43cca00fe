import Funnels
import LibPQ

/// Streams every event of a set of persons (or of everyone) of one app, in
/// person order, and hands each person's whole timeline to the caller. It reads
/// through a cursor in batches, inside the job's transaction, so the log is
/// never held in memory and the caller can write between batches on the same
/// connection (`afterBatch`).
struct PersonHistoryReader {
    enum Scope {
        /// Everyone (rebuild).
        case all
        /// Persons listed in the `touched` / `touched_keys` temp tables (incremental).
        case touched
    }

    let app: String
    /// Dotted paths the app's funnels read (`properties.page`, `context.os.name`).
    let paths: [String]

    func read(
        _ c: Connection, scope: Scope, afterBatch: (Int) throws -> Void, _ body: (String, [FunnelEvent]) throws -> Void
    ) throws {
        let source: String
        switch scope {
        case .all:
            source = "SELECT * FROM events WHERE app = $1"
        case .touched:
            // Two index-driven halves instead of one OR: events carrying a touched
            // user id, and anonymous events of a touched (or linked) anonymous id.
            source = """
                SELECT e.* FROM events e JOIN touched_keys k ON k.app = e.app AND k.id = e.user_id WHERE e.app = $1
                UNION ALL
                SELECT e.* FROM events e JOIN touched_keys k ON k.app = e.app AND k.id = e.anonymous_id
                WHERE e.app = $1 AND e.user_id IS NULL
                """
        }
        let roots = paths.map { String($0.split(separator: ".", maxSplits: 1).first ?? "") }
        let subpaths = paths.map { path -> String in
            let parts = path.split(separator: ".", maxSplits: 1)
            return parts.count == 2 ? String(parts[1]) : ""
        }
        let sql = """
            SELECT COALESCE(e.user_id, l.user_id, e.anonymous_id) AS person, e.message_id, e.type, e.event,
                   (extract(epoch FROM e."timestamp") * 1000000)::int8 AS ts,
                   ARRAY(SELECT CASE r.root
                                  WHEN 'properties' THEN e.properties #>> string_to_array(r.sub, '.')
                                  WHEN 'context' THEN e.context #>> string_to_array(r.sub, '.')
                                  WHEN 'traits' THEN e.traits #>> string_to_array(r.sub, '.')
                                END
                         FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS r(root, sub, n) ORDER BY r.n) AS attrs
            FROM (\(source)) e
            LEFT JOIN identity_links l ON l.app = e.app AND l.anonymous_id = e.anonymous_id
            ORDER BY 1, 5, e.seq
            """
        try c.query("DECLARE person_history NO SCROLL CURSOR FOR " + sql, [.text(app), .textArray(roots), .textArray(subpaths)])
        var person: String?
        var timeline: [FunnelEvent] = []
        while true {
            let batch = try c.query("FETCH \(Self.batchSize) FROM person_history")
            for row in batch.rows {
                let who = try row.decode(String.self, at: 0)
                if who != person {
                    if let person { try body(person, timeline) }
                    person = who
                    timeline.removeAll(keepingCapacity: true)
                }
                let values = try row.decode(PostgresArrayText.self, at: 5).elements
                var attributes: [String: String] = [:]
                for (path, value) in zip(paths, values) where value != nil {
                    attributes[path] = value
                }
                timeline.append(
                    FunnelEvent(
                        messageId: try row.decode(String.self, at: 1),
                        kind: EventKind(rawValue: try row.decode(String.self, at: 2)) ?? .track,
                        name: try row.decode(String?.self, at: 3),
                        timestamp: try row.decode(Int64.self, at: 4),
                        attributes: attributes))
            }
            if batch.rows.count < Self.batchSize {
                if let person { try body(person, timeline) }
                try c.query("CLOSE person_history")
                try afterBatch(batch.rows.count)
                return
            }
            try afterBatch(batch.rows.count)
        }
    }

    static let batchSize = 10_000
}
