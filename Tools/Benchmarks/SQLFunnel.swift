import Funnels
import LibPQ

/// The baseline an analyst would write instead of running the job: one SQL
/// query per funnel over the whole log, with the identity merge and the
/// conversion window, giving the persons reaching each required step.
///
/// It is the usual greedy chain (each step's first time after the previous
/// step's, within the window from the first start), matching steps by event
/// or screen name only: no `where` filters, optional steps, exclusions,
/// maximisation over starts or in-progress persons. So it does less than the
/// job, and still costs a full pass over the log per funnel. The SQL text
/// depends only on the number of steps; every value is a bound parameter.
enum SQLFunnel {
    struct Query {
        let sql: String
        let parameters: [PostgresValue]
    }

    static func query(for funnel: Funnel) -> Query {
        let steps = funnel.requiredStepIndices.map { funnel.steps[$0] }
        let keys = steps.map { step in step.matchers.map { ($0.kind == .event ? "track:" : "screen:") + $0.name } }
        // $1 app, $2 every key, $3 window (µs), then one key list per step.
        var parameters: [PostgresValue] = [.text(funnel.app), .textArray(keys.flatMap { $0 }), .int(funnel.windowMicroseconds)]
        var cases: [String] = []
        for (i, stepKeys) in keys.enumerated() {
            parameters.append(.textArray(stepKeys))
            cases.append("WHEN e.type || ':' || e.event = ANY($\(parameters.count)::text[]) THEN \(i + 1)")
        }
        // One sort by person, then one window pass per step over it: t_k is the
        // first step-k time at or after t_(k-1) and within the window from t_1.
        // (Self-joins of a CTE per step looked simpler, but the planner's row
        // estimate for the grouped CTE chose nested loops: minutes at 1 M.)
        var chain = """
            SELECT COALESCE(l.person_id, e.user_id, e.anonymous_id) AS person, e."timestamp" AS ts,
                   CASE \(cases.joined(separator: " ")) END AS step
            FROM events e LEFT JOIN identity_links l ON l.app = e.app AND l.anonymous_id = COALESCE(e.user_id, e.anonymous_id)
            WHERE e.app = $1 AND e.type IN ('track', 'screen') AND e.type || ':' || e.event = ANY($2::text[])
            """
        for k in 1...max(1, keys.count) {
            let condition = k == 1
                ? "step = 1" : "step = \(k) AND ts >= t\(k - 1) AND ts <= t1 + $3::int8 * interval '1 microsecond'"
            chain = "SELECT *, min(ts) FILTER (WHERE \(condition)) OVER (PARTITION BY person) AS t\(k) FROM (\(chain)) s\(k)"
        }
        let levels = 1...max(1, keys.count)
        let perPerson = "SELECT person, " + levels.map { "max(t\($0)) AS t\($0)" }.joined(separator: ", ")
            + " FROM (\(chain)) chain GROUP BY person"
        let counts = levels.map { "count(t\($0))" }.joined(separator: ", ")
        return Query(sql: "SELECT \(counts) FROM (\(perPerson)) persons", parameters: parameters)
    }

    /// Persons reaching each required step.
    static func run(_ c: Connection, funnel: Funnel) throws -> [Int] {
        let q = query(for: funnel)
        let row = try c.query(q.sql, q.parameters).rows.first
        return try (0..<(funnel.requiredStepIndices.count)).map { try row?.decode(Int.self, at: $0) ?? 0 }
    }
}
