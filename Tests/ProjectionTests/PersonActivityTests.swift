import Funnels
import LibPQ
import LocalPostgres
@testable import Projection
import Testing

/// An incremental run looks up only the stored rows the day's activity can
/// matter to (`PersonActivity.Relevance`); a row it left out would leave a
/// person's window or retention record stale.
@Suite("the stored rows activity can matter to")
struct PersonActivityTests {
    static let day: Int64 = 86_400_000_000
    static let hour: Int64 = 3_600_000_000
    /// The configured funnel's window; "g" is a funnel the run does not
    /// compute (no longer configured, or recomputed from the whole log after
    /// the incremental pass): its rows are never returned.
    static let window = 24 * hour

    struct Row {
        let person: String
        let funnel: String
        let start: Int64
        let chainStart: Int64?
        let openUntil: Int64?
        let level: Int
        let excluded: Bool
    }

    /// A day's activity and the configured retention days.
    struct Day: Sendable, CustomStringConvertible {
        let events: [Int64]
        let retentionDays: [Int]
        var description: String { "\(events.count) events over \(((events.max() ?? 0) - (events.min() ?? 0)) / PersonActivityTests.hour) h, days \(retentionDays)" }
    }

    static let first: Int64 = 1_795_000_000_000_000
    static let days: [Day] = [
        Day(events: [first, first + 2 * hour, first + 5 * hour + 17], retentionDays: [1, 7, 30]),
        // Late events: the days' spans overlap and are merged.
        Day(events: [first - 3 * day - 7, first - 26 * hour, first, first + 5 * hour], retentionDays: [1, 2, 3, 7, 30]),
        Day(events: [first, first + 9 * hour], retentionDays: []),
    ]

    /// Whether an event at one of `events` falls in the row's window or on
    /// one of its retention days: worked out here from docs/funnels.md's retention days and
    /// the funnel's window, not by the code under test.
    static func matters(_ row: Row, events: [Int64], retentionDays: [Int]) -> Bool {
        guard row.funnel == "f" else { return false }
        let windowEnd = max(max(row.start, row.chainStart ?? row.start) + window, row.openUntil ?? Int64.min)
        return events.contains { event in
            if event >= row.start && event <= windowEnd { return true }
            guard row.level >= 1, !row.excluded, event >= row.start else { return false }
            return retentionDays.contains(Int((event - row.start) / day))
        }
    }

    /// What the narrowing keeps: the rows that would matter to an event at
    /// any instant of the day's span, a second wider either side, with the
    /// longest window and every funnel's retention days.
    static func nearSpan(_ row: Row, first: Int64, last: Int64, retentionDays: [Int]) -> Bool {
        guard row.funnel == "f" else { return false }
        let from = first - 1_000_000, to = last + 1_000_000
        let windowEnd = max(max(row.start, row.chainStart ?? row.start) + window, row.openUntil ?? Int64.min)
        if row.start <= to && windowEnd >= from { return true }
        guard row.level >= 1, !row.excluded else { return false }
        return retentionDays.contains { n in row.start + Int64(n) * day <= to && row.start + Int64(n + 1) * day >= from }
    }

    @Test("every row with an event in its window or on a retention day is looked up, at the edges to the microsecond, by key and by scan; rows far from the day are not", arguments: days)
    func narrowingKeepsWhatMatters(_ activity: Day) async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let events = activity.events
        let first = events.min() ?? 0, last = events.max() ?? 0
        var rows: [Row] = []
        func add(
            start: Int64, chainStart: Int64? = nil, openUntil: Int64? = nil, level: Int = 2, excluded: Bool = false, funnel: String = "f"
        ) {
            rows.append(Row(
                person: "p\(rows.count)", funnel: funnel, start: start, chainStart: chainStart, openUntil: openUntil, level: level,
                excluded: excluded))
        }
        // Each retention day's edges around each event, one microsecond either side.
        for event in events {
            for n in Set(activity.retentionDays + [1, 7, 30]) {
                for start in [event - Int64(n) * Self.day, event - Int64(n + 1) * Self.day] {
                    for nudge: Int64 in [-1, 0, 1] {
                        add(start: start + nudge)
                        add(start: start + nudge, level: 0)
                        add(start: start + nudge, excluded: true)
                        add(start: start + nudge, funnel: "g")
                    }
                }
            }
            // The window's end: from the start, from a later chain's start, an open window's end.
            for nudge: Int64 in [-1, 0, 1] {
                for funnel in ["f", "g"] {
                    add(start: event - Self.window + nudge, level: 0, funnel: funnel)
                    add(start: event - 3 * Self.day, chainStart: event - Self.window + nudge, level: 0, funnel: funnel)
                    add(start: event - 3 * Self.day, openUntil: event + nudge, level: 0, funnel: funnel)
                    add(start: event + nudge, level: 0, funnel: funnel)
                }
            }
        }
        // Starts every 97 minutes over the forty days before, and a few after.
        for step in 0..<600 {
            add(start: first - 40 * Self.day + Int64(step) * 97 * 60_000_000, level: step % 3, excluded: step % 11 == 0)
        }
        let stored = rows
        try await pool.withConnection { c in
            for row in stored {
                try c.query(
                    """
                    INSERT INTO funnel_persons (funnel, app, person_id, cohort_day, level, last_step_index, last_step_name,
                        completed, in_progress, excluded, start_time, chain_start_time, open_until, step_times_us,
                        optional_steps_done, breakdown)
                    VALUES ($1, 'a', $2, '2026-11-18', $3, 0, 'welcome', false, $4, $5, $6, $7, $8, '{}', '{}', '{}')
                    """,
                    [.text(row.funnel), .text(row.person), .int(Int64(row.level)), .bool(row.openUntil != nil), .bool(row.excluded),
                     .microseconds(row.start), row.chainStart.map { .microseconds($0) } ?? .null,
                     row.openUntil.map { .microseconds($0) } ?? .null])
            }
        }
        let expected = Set(rows.filter { Self.matters($0, events: events, retentionDays: activity.retentionDays) }.map(\.person))
        let near = Set(rows.filter { Self.nearSpan($0, first: first, last: last, retentionDays: activity.retentionDays) }.map { $0.person })
        let keys = rows.map { NewEvents.Key(app: "a", id: $0.person) }
        for byScan in [false, true] {
            let found = try await pool.withConnection { c in
                let lookup = try PersonActivity.Lookup(
                    c, windows: ["f": Self.window], activityDays: Set(activity.retentionDays), activitySpan: first...last,
                    scanShare: byScan ? 0 : .infinity, dialect: .postgres)
                return try PersonActivity.starts(c, of: keys[...], lookup: lookup, byScan: byScan)
            }
            let returned = Set(found.keys.map(\.id))
            #expect(expected.subtracting(returned).isEmpty, "left out (by scan: \(byScan)): \(expected.subtracting(returned).sorted())")
            #expect(returned == near, "by scan: \(byScan): \(returned.symmetricDifference(near).sorted())")
            #expect(returned.count < rows.count * 2 / 3 && expected.count > 50, "\(expected.count), \(returned.count) of \(rows.count)")
        }
        await pool.close()
        try await db.drop()
    }
}
