import Foundation
public import Funnels
public import LibPQ

/// The persons behind a number of a configured funnel's stored report, as
/// of the last nightly run (`onramp report --persons`): read with
/// `analytics.funnel_step_persons`, the function analysts call, so the
/// terminal and SQL list the same persons in the same order, and a login
/// lists only the apps it is granted. Reads; writes nothing.
public enum StoredPersons {
    /// Hands each person of `cell` in `funnel` to `body` as the rows come,
    /// in the lists' order; returns how many there were. A cell the stored
    /// funnel cannot answer (a breakdown value it does not have, a funnel
    /// the last run did not build) is refused by the function, naming it
    /// (`PostgresError`, SQLSTATE 22023).
    @discardableResult
    public static func forEach(_ c: Connection, funnel: Funnel, cell: PersonCell, _ body: (ListedPerson) throws -> Void) throws -> Int {
        var count = 0
        try c.forEachRow(
            """
            SELECT coalesce(s.person_id, s.group_id), array_to_json(s.ids)::text, s.cohort_day::text,
                   (extract(epoch FROM s.chain_start) * 1000000)::int8, s.last_step_index, s.last_step_name,
                   (extract(epoch FROM s.last_step_time) * 1000000)::int8, s.breakdown::text
            FROM analytics.funnel_step_persons($1, $2::integer, $3, $4, $5) AS s
            """,
            [.text(funnel.name), .int(Int64(cell.step)), .text(cell.outcome.rawValue), cell.breakdown.map { .text($0.path) } ?? .null,
             cell.breakdown.map { .text($0.value) } ?? .null]
        ) { row in
            let ids = try JSONDecoder().decode([String].self, from: Data((row.text(at: 1) ?? "[]").utf8))
            let breakdown = try JSONDecoder().decode([String: String].self, from: Data((row.text(at: 7) ?? "{}").utf8))
            try body(ListedPerson(
                id: row.text(at: 0) ?? "", ids: ids, cohortDay: row.text(at: 2) ?? "", chainStart: try row.decode(Int64?.self, at: 3),
                lastStep: try row.decode(Int.self, at: 4), lastStepName: row.text(at: 5) ?? "", lastStepTime: try row.decode(Int64?.self, at: 6),
                breakdown: funnel.breakdowns.map { breakdown[$0] ?? PersonOutcome.missingBreakdownValue }))
            count += 1
        }
        return count
    }
}
