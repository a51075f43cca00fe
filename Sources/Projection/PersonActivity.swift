import Dispatch
import Funnels
import LibPQ
import NIOConcurrencyHelpers

/// A person an incremental run does not recompute although they have new
/// events: all of them are activity (`OutcomeEvents`) and none falls in a
/// stored window of theirs, so no outcome or drop-off fact can change. What
/// retention needs of them: the events, and the outcomes stored for them.
struct PersonActivity: Sendable {
    /// One of their `funnel_persons` rows, as retention reads it.
    struct Start: Sendable {
        let funnel: String
        let cohortDay: String
        /// `start_time`, microseconds.
        let start: Int64
        let completed: Bool
        let inProgress: Bool
        let excluded: Bool
        let level: Int
        /// The retention days of their record (`funnel_person_retention`), read in the same lookup.
        let retainedDays: [Int]

        /// Whether the day tables count the person: window closed, not excluded, at step 1.
        var isCounted: Bool { !inProgress && !excluded && level >= 1 }
    }

    let app: String
    let person: String
    let events: [NewEvents.Activity]
    let starts: [Start]

    typealias Found = [NewEvents.Key: [(start: Start, windowEnd: Int64)]]

    /// The stored outcomes of `persons` (app, person -> their activity), by
    /// key, one index lookup each, with their retention records; with the end
    /// of the latest window any of them still looks at (`windowEnd`, given a
    /// funnel's window).
    ///
    /// A day of a live app has about as many active persons as a tenth of
    /// everyone stored, and these lookups are PostgreSQL's work on one
    /// session while the job waits: the keys are split in two halves, looked
    /// up side by side on the run's session and on `reader`. Both see the same
    /// stored outcomes: the run has changed none yet, and the reader shares
    /// its snapshot (`SnapshotReader`). At 1 M events a day's 8,051 active
    /// persons took 128 ms on one session, about 95 ms on two.
    static func starts(
        _ c: Connection, beside reader: Connection, of persons: [NewEvents.Key], windows: [String: Int64]
    ) throws -> Found {
        guard reader !== c, persons.count > 1 else { return try starts(c, of: persons[...], windows: windows) }
        let half = persons.count / 2
        let halves = [(c, persons[..<half]), (reader, persons[half...])]
        let results = NIOLockedValueBox([Result<Found, any Error>](repeating: .success([:]), count: halves.count))
        DispatchQueue.concurrentPerform(iterations: halves.count) { i in
            let result = Result { try starts(halves[i].0, of: halves[i].1, windows: windows) }
            results.withLockedValue { $0[i] = result }
        }
        var found: Found = [:]
        for result in results.withLockedValue({ $0 }) { found.merge(try result.get()) { mine, _ in mine } }
        return found
    }

    /// The stored outcomes of the day's user ids with activity, looked up on
    /// `reader`, on a background thread, while the run's session updates the
    /// identity links: a user id is its own person, so these keys need no
    /// link, and the reader sees the same stored outcomes (see `starts`).
    /// Only the anonymous ids' persons are left to look up after the links.
    /// At 1 M events the user ids are two thirds of the day's active persons.
    final class Prefetch: Sendable {
        /// The keys looked up: those without stored outcomes are not in the result.
        let keys: Set<NewEvents.Key>
        private let group = DispatchGroup()
        private let result = NIOLockedValueBox<Result<Found, any Error>>(.success([:]))

        init(on reader: Connection, of keys: [NewEvents.Key], windows: [String: Int64]) {
            self.keys = Set(keys)
            let result = self.result
            DispatchQueue.global().async(group: group) {
                let found = Result { try PersonActivity.starts(reader, of: keys[...], windows: windows) }
                result.withLockedValue { $0 = found }
            }
        }

        /// Waits for the lookup: after it, the reader is free again.
        func wait() throws -> Found {
            group.wait()
            return try result.withLockedValue { $0 }.get()
        }
    }

    private static func starts(_ c: Connection, of persons: ArraySlice<NewEvents.Key>, windows: [String: Int64]) throws -> Found {
        var found: Found = [:]
        guard !persons.isEmpty else { return found }
        // Each row names its key by its position in the arrays (a number, where
        // the key's text would be one more string to make per row).
        try c.forEachRow(
            """
            SELECT t.n, p.funnel, p.cohort_day::text, p.start_time, p.chain_start_time, p.open_until,
                   p.completed, p.in_progress, p.excluded, p.level, r.retained_days
            FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(app, person, n)
            CROSS JOIN LATERAL (SELECT * FROM funnel_persons p WHERE p.app = t.app AND p.person_id = t.person OFFSET 0) p
            LEFT JOIN funnel_person_retention r ON r.app = p.app AND r.person_id = p.person_id AND r.funnel = p.funnel
            """, [.textArray(persons.map(\.app)), .textArray(persons.map(\.id))]
        ) { row in
            let n = try row.decode(Int.self, at: 0)
            guard n >= 1, n <= persons.count else { throw PostgresError(.unexpectedResult, message: "outcome lookup returned key \(n)") }
            let funnel = try row.decode(String.self, at: 1)
            let start = try row.decode(PostgresTimestamp.self, at: 3).microseconds
            let chainStart = try row.decode(PostgresTimestamp?.self, at: 4)?.microseconds ?? start
            // Every event a stored fact looked at is before the latest chain's
            // window ends, or before the open window's end (a window no longer
            // configured ends at once: the funnel is not read).
            let (end, overflow) = max(start, chainStart).addingReportingOverflow(windows[funnel] ?? 0)
            let windowEnd = max(overflow ? Int64.max : end, try row.decode(PostgresTimestamp?.self, at: 5)?.microseconds ?? Int64.min)
            found[persons[persons.startIndex + n - 1], default: []].append((
                Start(
                    funnel: funnel, cohortDay: try row.decode(String.self, at: 2), start: start,
                    completed: try row.decode(Bool.self, at: 6), inProgress: try row.decode(Bool.self, at: 7),
                    excluded: try row.decode(Bool.self, at: 8), level: try row.decode(Int.self, at: 9),
                    retainedDays: try RetentionAnalysis.retainedDays(row, at: 10)),
                windowEnd
            ))
        }
        return found
    }
}
