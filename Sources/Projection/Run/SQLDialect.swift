import EventLog

/// How the job's lookups by key are written for where its tables live: one
/// PostgreSQL, or Citus (docs/scaling.md, "Onramp on Citus today").
///
/// On one PostgreSQL a lookup by key is a LATERAL subquery kept apart by
/// `fence` (`OFFSET 0`): the planner probes an index once per key, where,
/// left to join the keys with the table, it would hash the whole table, a
/// cost that grows with the history rather than the day. A person's rows are
/// deleted by their row address, found that way. Citus refuses an `OFFSET`
/// or `LIMIT` in a LATERAL subquery over the keys' table function, and a row
/// address means nothing across shards: there the subqueries go unfenced,
/// which Citus plans shard by shard, and a delete joins the keys.
enum SQLDialect: Sendable {
    case postgres
    case citus

    init(_ layout: EventLogLayout) {
        self = layout == .distributed ? .citus : .postgres
    }

    /// Ends a subquery that must stay apart from the query around it.
    var fence: String {
        switch self {
        case .postgres: "OFFSET 0"
        case .citus: ""
        }
    }

    /// Deletes the rows of `table` (which has `app` and `person_id`) of
    /// `persons` (a relation `t(app, person)`; by default the run's
    /// `touched` temp table); `returning` lists what comes back, of the
    /// deleted rows `f`. `table` and `persons` are the code's own SQL, never
    /// input.
    /// Rows for which `keeping` (the code's own SQL over `d`) holds stay.
    func delete(from table: String, of persons: String = "touched t", keeping: String? = nil, returning: String? = nil) -> String {
        let kept = keeping.map { " AND NOT (\($0))" } ?? ""
        let delete =
            switch self {
            case .postgres:
                """
                DELETE FROM \(table) d USING \(persons)
                CROSS JOIN LATERAL (SELECT p.ctid FROM \(table) p WHERE p.app = t.app AND p.person_id = t.person OFFSET 0) p
                WHERE d.ctid = p.ctid\(kept)
                """
            case .citus:
                "DELETE FROM \(table) d USING \(persons) WHERE d.app = t.app AND d.person_id = t.person\(kept)"
            }
        // What comes back is computed outside the delete: Citus allows only
        // immutable functions in RETURNING, and a date's text is not one.
        guard let returning else { return delete }
        return "WITH f AS (\(delete)\nRETURNING d.*)\nSELECT \(returning) FROM f"
    }
}
