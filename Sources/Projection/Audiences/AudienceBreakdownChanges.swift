import Funnels
import LibPQ
import LogReading

/// The units an incremental run recomputes because their membership of an
/// audience a funnel is broken down by (`AudienceBreakdown`) changed with
/// the clock alone: their rows carry the membership at the clock of the run
/// that evaluated them. Without new events a unit's membership changes only
/// where one of its spans (`AudienceSpanStore`) begins or ends, so those
/// whose span did between the last run's clock and this one's are the
/// ones; a unit with new events is recomputed anyway.
enum AudienceBreakdownChanges {
    /// Persons and groups (by group id) of `funnels`' audience breakdowns whose span began or ended since the last run.
    static func units(_ c: Connection, funnels: [Funnel], now: Int64) throws -> (persons: Set<NewEvents.Key>, groups: Set<NewEvents.Key>) {
        let audiences = Set(funnels.flatMap(\.audienceBreakdowns)).sorted()
        guard !audiences.isEmpty else { return ([], []) }
        // Before the first run that kept the clock, every span up to now (from year 1).
        let since = try Checkpoint.clock(c) ?? -62_135_596_800_000_000
        var persons = Set<NewEvents.Key>(), groups = Set<NewEvents.Key>()
        for row in try c.query(
            """
            SELECT app, person_id FROM audience_spans
            WHERE audience = ANY($1::text[]) AND enters_at > $2 AND enters_at <= $3
            UNION
            SELECT app, person_id FROM audience_spans
            WHERE audience = ANY($1::text[]) AND leaves_at > $2 AND leaves_at <= $3
            """, [.textArray(audiences), .microseconds(since), .microseconds(now)]
        ).rows {
            let app = try row.decode(String.self, at: 0), unit = try row.decode(String.self, at: 1)
            if HistoryUnit.isGroup(unit) {
                groups.insert(NewEvents.Key(app: app, id: String(unit.dropFirst())))
            } else {
                persons.insert(NewEvents.Key(app: app, id: unit))
            }
        }
        return (persons, groups)
    }
}
