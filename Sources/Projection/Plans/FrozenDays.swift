import Foundation
import Funnels
import LibPQ

/// Cohort days the archive made final (docs/funnels.md, "Archived
/// history"): once months of the log are archived, a person's history before
/// them is gone, so the days that counted it are never computed again.
/// Frozen are the cohort days before the end of the newest archived month
/// plus the longest funnel window and a day (for the zones the days are cut
/// in): a row of such a day (a person's outcome, their analyses' rows, the
/// day's tables) is kept as it is, by a night and a rebuild alike, and a
/// person with one keeps it in that funnel: later events and links change
/// only days that are not frozen. A restored month unfreezes its days.
struct FrozenDays: Sendable {
    /// Cohort days before this (YYYY-MM-DD) are frozen; nil: none is.
    let before: String?
    /// Funnel -> the persons (of those the run evaluates) with a row on a frozen day.
    private(set) var persons: [String: Set<String>] = [:]

    static let none = FrozenDays(before: nil)

    init(before: String?) {
        self.before = before
    }

    /// From the archived months and the configured funnels' longest window.
    static func read(_ c: Connection, funnels: [Funnel]) throws -> FrozenDays {
        guard let kept = try c.query("SELECT (max(month) + interval '1 month')::date::text FROM archived_months").rows.first,
              let first = try kept.decode(String?.self, at: 0), let day = CohortCalendar.dayNumber(ofText: first) else { return .none }
        let window = funnels.map(\.windowSeconds).max() ?? 0
        return FrozenDays(before: CohortCalendar.text(ofDay: day + (window + 86_399) / 86_400 + 1))
    }

    /// The bound as a statement parameter: a date no day is before when nothing is frozen.
    var parameter: PostgresValue { .text(before ?? "-infinity") }

    func isFrozen(_ day: String) -> Bool { before.map { day < $0 } ?? false }

    /// `parts` without the frozen days': what a run may change.
    func unfrozen<T>(_ parts: [FunnelDay: T]) -> [FunnelDay: T] {
        before == nil ? parts : parts.filter { !isFrozen($0.key.day) }
    }

    /// Whether the evaluated outcome of `person` in `funnel`, on `day`, is
    /// left out: the day is frozen, or the person keeps a frozen row there.
    func leavesOut(funnel: String, person: String, day: String) -> Bool {
        guard before != nil else { return false }
        return isFrozen(day) || persons[funnel]?.contains(person) == true
    }

    /// Loads the frozen rows' persons among `from` (SQL over `p`, a
    /// `funnel_persons` relation: the run's touched persons, or all).
    mutating func loadPersons(_ c: Connection, from relation: String) throws {
        guard before != nil else { return }
        try c.forEachBinaryRow(
            "SELECT p.funnel, p.person_id FROM \(relation) WHERE p.cohort_day < $1::date", [parameter], streaming: true
        ) { row in
            persons[try row.required(0, row.text), default: []].insert(try row.required(1, row.text))
        }
    }
}
