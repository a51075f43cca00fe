import Funnels
import LibPQ
import LogReading

/// A person an incremental run does not recompute although they have new
/// events: all of them are activity (`OutcomeEvents`) and none falls in a
/// stored window of theirs, so no outcome or drop-off fact can change. What
/// an analysis reading activity past the windows needs of them
/// (`PersonAnalysis.activityDays`): the events, and those of their stored
/// outcomes the day's activity can matter to (`Lookup.relevance`).
struct PersonActivity: Sendable {
    /// One of their `funnel_persons` rows.
    struct Start: Sendable {
        let funnel: String
        let cohortDay: String
        /// `start_time`, microseconds.
        let start: Int64
        let completed: Bool
        let inProgress: Bool
        let excluded: Bool
        let level: Int
        /// The end of the latest window the stored facts of the row look at
        /// (given the funnel's window): an event after it changes none of them.
        let windowEnd: Int64
        /// `open_until` is unset: the window has closed (`PersonOutcome.windowClosed`).
        let windowClosed: Bool

        /// Whether the day tables count the person: window closed, not excluded, at step 1.
        var isCounted: Bool { !inProgress && windowClosed && !excluded && level >= 1 }
    }

    let app: String
    let person: String
    let events: [NewEvents.Activity]
    let starts: [Start]

    typealias Found = [NewEvents.Key: [Start]]

    /// Whether any of `events` falls in the window a stored fact of `starts`
    /// looks at: then the person (or group) is recomputed, not updated.
    static func fallsInWindow(_ events: [NewEvents.Activity], of starts: [Start]) -> Bool {
        starts.contains { start in events.contains { $0.timestamp >= start.start && $0.timestamp <= start.windowEnd } }
    }

    /// How a run looks up keys in a stored table: key by key, one index probe
    /// each, whatever the history's size, which keeps the run's cost
    /// following the day; or by one scan of the table joined to the keys by
    /// hash, which follows the table. A day of a live app can have a large
    /// share of everyone stored active, and past one key in 16 rows the scan
    /// costs PostgreSQL less. PostgreSQL's planner would pick by its estimates,
    /// which for keys in an array or a temp table are far off, so the run
    /// picks by the count; in a history many times larger than the day's
    /// keys it looks them up key by key.
    struct Lookup: Sendable {
        /// Funnel -> window, microseconds.
        let windows: [String: Int64]
        /// `funnel_persons`' and `identity_links`' rows as PostgreSQL last
        /// counted them (negative: never counted).
        let storedOutcomes: Int
        let storedLinks: Int
        /// Keys are looked up by scan when at least this share of the rows.
        let scanShare: Double

        /// Which stored rows the day's activity can matter to.
        let relevance: Relevance
        /// How a lookup by key is written.
        let dialect: SQLDialect

        init(
            _ c: Connection, windows: [String: Int64], activityDays: Set<Int>, activitySpan: ClosedRange<Int64>?,
            scanShare: Double, dialect: SQLDialect
        ) throws {
            self.windows = windows
            self.dialect = dialect
            relevance = Relevance(longestWindow: windows.values.max() ?? 0, activityDays: activityDays, span: activitySpan)
            self.scanShare = scanShare
            let counts = try c.query(
                """
                SELECT (SELECT reltuples FROM pg_class WHERE oid = 'funnel_persons'::regclass)::int8,
                       (SELECT reltuples FROM pg_class WHERE oid = 'identity_links'::regclass)::int8
                """
            ).rows.first
            storedOutcomes = try counts?.decode(Int.self, at: 0) ?? -1
            storedLinks = try counts?.decode(Int.self, at: 1) ?? -1
        }

        /// Whether `keys` of the active persons' outcomes are looked up by scan.
        func byScan(keys: Int) -> Bool { Self.byScan(keys: keys, rows: storedOutcomes, share: scanShare) }

        /// Whether `candidates` new links are checked against the stored ones by scan.
        func byScan(links candidates: Int) -> Bool { Self.byScan(keys: candidates, rows: storedLinks, share: scanShare) }

        private static func byScan(keys: Int, rows: Int, share: Double) -> Bool {
            rows >= 0 && Double(keys) >= share * Double(rows)
        }

        /// The active persons' `keys` as `starts` takes them: by scan, as
        /// they come; key by key, in the index's order (`TouchedPersons.sorted`).
        func ordered(_ keys: some Collection<NewEvents.Key>) -> (keys: [NewEvents.Key], byScan: Bool) {
            let byScan = byScan(keys: keys.count)
            return (byScan ? Array(keys) : TouchedPersons.sorted(keys), byScan)
        }
    }

    /// The stored rows the day's activity can matter to, picked in SQL
    /// before they are sent and decoded: those with a window a stored fact
    /// looks at (from the start to `Start.windowEnd`) that an event may fall
    /// in, and those counted (step 1 reached, not excluded) with a day an
    /// analysis reads activity on (`PersonAnalysis.activityDays`) that one
    /// may fall on. Bounded by the span of the whole day's activity, the
    /// longest window and those days, each bound a second wider: more rows
    /// than any person's own events can matter to, never fewer, so
    /// `TouchedPersons` and the analyses, which check event by event, find
    /// what they found among every row.
    struct Relevance: Sendable {
        /// On `funnel_persons p`, its parameters from $3. The bounds are
        /// parameters, or sub-selects PostgreSQL works out once, never
        /// expressions it would work out for each row (`timestamptz -
        /// interval` is); the activity days' spans are found among theirs
        /// by `width_bucket`, a binary search.
        static let condition = """
            (p.start_time <= $3 AND (p.start_time >= $4 OR p.chain_start_time >= $4 OR p.open_until >= $5)
             OR p.level >= 1 AND NOT p.excluded AND p.start_time <= (
                SELECT array_agg(to_timestamp(u::float8 / 1000000) ORDER BY u) FROM unnest($7::int8[]) AS u
             )[width_bucket(p.start_time, (
                SELECT array_agg(to_timestamp(l::float8 / 1000000) ORDER BY l) FROM unnest($6::int8[]) AS l))])
            """

        /// $3 to $7.
        let parameters: [PostgresValue]

        private static let margin: Int64 = 1_000_000
        private static let day: Int64 = 86_400_000_000
        /// Years 1 and 9999, in microseconds: the bounds stay inside what PostgreSQL takes.
        private static let earliest: Int64 = -62_135_596_800_000_000, latest: Int64 = 253_402_300_799_000_000

        /// With no activity, every row starting in years 1 to 9999 passes.
        init(longestWindow: Int64, activityDays: Set<Int>, span: ClosedRange<Int64>?) {
            func bound(_ value: Int64, _ offset: Int64) -> Int64 {
                let (moved, overflow) = value.addingReportingOverflow(offset)
                return overflow ? (offset < 0 ? Self.earliest : Self.latest) : min(max(moved, Self.earliest), Self.latest)
            }
            let first = span?.lowerBound ?? Self.earliest, last = span?.upperBound ?? Self.latest
            // A start on day n before an event: after the event less n + 1
            // days, no later than it less n days; overlapping spans merged, so
            // that each start has one span to be found in.
            var spans: [(lower: Int64, upper: Int64)] = []
            for n in activityDays where n >= 0 {
                let (days, overflow) = Int64(n).multipliedReportingOverflow(by: Self.day)
                guard !overflow else { continue }  // past year 9999
                spans.append((bound(bound(first, -days), -Self.day - Self.margin), bound(last, Self.margin - days)))
            }
            var merged: [(lower: Int64, upper: Int64)] = []
            for span in spans.sorted(by: { $0.lower < $1.lower }) {
                if let previous = merged.last, span.lower <= previous.upper {
                    merged[merged.count - 1].upper = max(previous.upper, span.upper)
                } else {
                    merged.append(span)
                }
            }
            parameters = [
                .microseconds(bound(last, Self.margin)), .microseconds(bound(bound(first, -Self.margin), -max(0, longestWindow))),
                .microseconds(bound(first, -Self.margin)), .intArray(merged.map(\.lower)), .intArray(merged.map(\.upper)),
            ]
        }
    }

    /// The stored outcomes of the day's active keys (`starts`), looked up on
    /// `reader`, on its lane, while the run's session updates the identity
    /// links: this lookup is PostgreSQL's work while the job waits. Both
    /// sessions see the same stored outcomes: the run has changed none yet,
    /// and the reader shares its snapshot (`SnapshotReader`). A user id is
    /// its own person and needs no link, and so is an anonymous id no link
    /// names a user for, as most are; the few others are looked up after
    /// the links, on the run's session (`TouchedPersons`).
    static func prefetch(
        on reader: Connection, lane: Background, of keys: some Collection<NewEvents.Key>, lookup: Lookup
    ) -> Pending<Found> {
        let (ordered, byScan) = lookup.ordered(keys)
        return lane.run { try starts(reader, of: ordered[...], lookup: lookup, byScan: byScan) }
    }

    /// The stored outcomes of `persons` (app, person -> their activity) the
    /// day's activity can matter to (`Relevance`), key by key or by scan
    /// (`Lookup`); with the end of the latest
    /// window any of them still looks at (`windowEnd`, given a funnel's window).
    static func starts(
        _ c: Connection, of persons: ArraySlice<NewEvents.Key>, lookup: Lookup, byScan: Bool
    ) throws -> Found {
        let windows = lookup.windows
        var found: Found = [:]
        guard !persons.isEmpty else { return found }
        // At most an entry per key: reserved, the table is never hashed again as it grows.
        found.reserveCapacity(persons.count)
        // Key by key: LATERAL, kept apart by OFFSET 0, one probe per key. By
        // scan: `funnel_persons` fenced off by OFFSET 0, so nothing can probe
        // it, and the keys handed over in a subquery, which hides their
        // count: knowing it, and not how distinct they are, the planner hashes
        // the whole table rather than the keys.
        let keys = byScan ? "unnest((SELECT $1::text[]), (SELECT $2::text[]))" : "unnest($1::text[], $2::text[])"
        let joins = byScan
            ? """
              JOIN (SELECT app, person_id, funnel, cohort_day, start_time, chain_start_time, open_until, completed, in_progress,
                           excluded, level FROM funnel_persons p WHERE \(Relevance.condition) \(lookup.dialect.fence)) p
                ON p.app = t.app AND p.person_id = t.person
              """
            : """
              CROSS JOIN LATERAL (
                SELECT * FROM funnel_persons p WHERE p.app = t.app AND p.person_id = t.person AND \(Relevance.condition) \(lookup.dialect.fence)) p
              """
        // Each row names its key by its position in the arrays (a number, where
        // the key's text would be one more string to make per row); in
        // binary, where each timestamp was text to parse.
        try c.forEachBinaryRow(
            """
            SELECT t.n, p.funnel, p.cohort_day::text, p.start_time, p.chain_start_time, p.open_until,
                   p.completed, p.in_progress, p.excluded, p.level
            FROM \(keys) WITH ORDINALITY AS t(app, person, n)
            \(joins)
            """, NewEvents.Key.parameters(persons) + lookup.relevance.parameters
        ) { row in
            let n = try row.required(0, row.int)
            guard n >= 1, n <= persons.count else { throw PostgresError(.unexpectedResult, message: "outcome lookup returned key \(n)") }
            let funnel = try row.required(1, row.text)
            // A funnel this run does not compute (no longer configured, or
            // recomputed from the whole log after it) is not read: the run's
            // session has removed its rows, which the snapshot reader still sees.
            guard let window = windows[funnel] else { return }
            let start = try row.required(3, row.timestamp)
            let chainStart = try row.timestamp(4) ?? start
            // Every event a stored fact looked at is before the latest chain's
            // window ends, or before the open window's end.
            let (end, overflow) = max(start, chainStart).addingReportingOverflow(window)
            let openUntil = try row.timestamp(5)
            let windowEnd = max(overflow ? Int64.max : end, openUntil ?? Int64.min)
            found[persons[persons.startIndex + n - 1], default: []].append(
                Start(
                    funnel: funnel, cohortDay: try row.required(2, row.text), start: start, completed: try row.required(6, row.bool),
                    inProgress: try row.required(7, row.bool), excluded: try row.required(8, row.bool),
                    level: try row.required(9, row.int),
                    windowEnd: windowEnd, windowClosed: openUntil == nil))
        }
        return found
    }
}
