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
        // One plain expression per path (no per-row subquery): the column comes from a fixed
        // whitelist, the path inside it is a bound text[] parameter ($2, $3, …).
        var extractions: [String] = []
        var pathParameters: [PostgresValue] = []
        for path in paths {
            let parts = path.split(separator: ".", maxSplits: 1).map(String.init)
            let column: String
            switch parts.first {
            case "properties": column = "e.properties"
            case "context": column = "e.context"
            case "traits": column = "e.traits"
            default: column = "NULL::jsonb"  // the engine only reads these three roots
            }
            pathParameters.append(.textArray(parts.count == 2 ? parts[1].split(separator: ".").map(String.init) : []))
            extractions.append("\(column) #>> $\(pathParameters.count + 1)::text[]")
        }
        let attributes = extractions.isEmpty ? "ARRAY[]::text[]" : "ARRAY[\(extractions.joined(separator: ", "))]"
        let sql = """
            SELECT COALESCE(e.user_id, l.user_id, e.anonymous_id) AS person, e.message_id, e.type, e.event,
                   e."timestamp" AS ts,
                   \(attributes) AS attrs
            FROM (\(source)) e
            LEFT JOIN identity_links l ON l.app = e.app AND l.anonymous_id = e.anonymous_id
            ORDER BY 1, 5, e.seq
            """
        try c.query("DECLARE person_history NO SCROLL CURSOR FOR " + sql, [.text(app)] + pathParameters)
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
                        timestamp: try row.decode(PostgresTimestamp.self, at: 4).microseconds,
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
