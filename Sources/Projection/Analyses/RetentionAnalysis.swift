import Funnels
import LibPQ

/// Whether finishing onboarding goes with staying (docs/funnels.md, "Retention"), as a per-person
/// analysis: each started person's retention days (the configured days after
/// their start on which they were active) go to `funnel_person_retention`,
/// and per funnel and cohort day the start times of the persons counted and
/// of those retained (`RetentionCounts`) go to `funnel_retention_starts`,
/// from which `funnel_retention` is written as the run's clock sees them.
///
/// Retention reads events long after onboarding, which most of a live app's
/// events are. Those are activity (`OutcomeEvents`): an incremental run does
/// not recompute their persons but adds each activity to the person's record
/// here, one key lookup per person, and only the days that gained someone
/// are rewritten. The clock changes who is eligible; `funnel_retention`
/// remembers when its next pending person becomes eligible, and the days
/// past that are rewritten from their stored start times (`daysDue`).
struct RetentionAnalysis: PersonAnalysis {
    let table = "funnel_person_retention"
    let copyStatement = """
        COPY funnel_person_retention (app, person_id, funnel, cohort_day, retained_days) FROM STDIN (FORMAT binary)
        """
    let dayTables = ["funnel_retention_starts", "funnel_retention"]
    private let settings: [String: RetentionSettings]

    init(funnels: [Funnel]) {
        settings = Dictionary(funnels.map { ($0.name, $0.retention) }, uniquingKeysWith: { first, _ in first })
    }

    /// One funnel day's start times.
    typealias Tally = DayTally<RetentionCounts>

    /// A row for every started, not excluded person active on some retention
    /// day; the day's tally counts them once their window has closed.
    func append(
        _ evaluated: EvaluatedFunnel, events: [FunnelEvent], to rows: inout BinaryCopyRows, tally: inout (any AnalysisTally)?
    ) throws {
        let funnel = evaluated.funnel, outcome = evaluated.outcome
        guard outcome.level >= 1, !outcome.excluded, let start = outcome.startTime, let settings = settings[funnel.name] else { return }
        let retained = settings.retainedDays(start: start, events: events)
        if outcome.windowClosed {
            Tally.update(&tally) { $0.counts.add(start: start, completed: outcome.completed, retainedDays: retained) }
        }
        guard !retained.isEmpty else { return }
        rows.startRow(fields: 5)
        let written = rows.append(text: funnel.app) && rows.append(text: evaluated.person) && rows.append(text: funnel.name)
        rows.append(date: evaluated.cohortDay)
        rows.append(int4Array: retained.map { Int32(truncatingIfNeeded: $0) })
        guard written else {
            throw ProjectionError.unwritable(funnel: funnel.name, person: evaluated.person, "a value holds a NUL byte")
        }
    }

    func storedDayChange(_ c: Connection, now: Int64, activity: [PersonActivity]) throws -> StoredDayChange {
        var change = StoredDayChange()
        // First the activity, so that windows closing in place below count
        // their persons with it.
        try record(c, activity: activity, change: &change)
        // Those whose window closes in place (as `OutcomeStore.closeWindows` picks them) will count.
        try forEachCounted(
            c, from: "funnel_persons p",
            where: OutcomeStore.closingInPlace, [.microseconds(now)]
        ) { day, start, completed, retained in
            Tally.update(&change.added[day]) { $0.counts.add(start: start, completed: completed, retainedDays: retained) }
        }
        return change
    }

    /// The touched persons are recomputed, so `record` never changes their
    /// records: read before or after it, they are as the run found them.
    func touchedDayParts(_ c: Connection) throws -> [FunnelDay: any AnalysisTally] {
        var parts: [FunnelDay: any AnalysisTally] = [:]
        try forEachCounted(c, from: Self.touchedOutcomes, where: OutcomeStore.windowClosed, []) { day, start, completed, retained in
            Tally.update(&parts[day]) { $0.counts.add(start: start, completed: completed, retainedDays: retained) }
        }
        return parts
    }

    /// Adds the activity of persons not recomputed to their records (read
    /// with their outcomes, `PersonActivity.starts`): the retention days it
    /// falls on join the stored ones, and a person the days count is added
    /// to the day's retained of each new one.
    private func record(_ c: Connection, activity: [PersonActivity], change: inout StoredDayChange) throws {
        guard !activity.isEmpty else { return }
        var updated: [(PersonKey, String, [Int])] = []
        for person in activity {
            for start in person.starts where start.level >= 1 && !start.excluded {
                guard let settings = settings[start.funnel] else { continue }
                // The days an event falls on that the record lacks: a few
                // values, looked for in short arrays (a set of the record's
                // days, made for each person, would cost more than it saves).
                let old = start.retainedDays
                var new: [Int] = []
                for event in person.events {
                    guard let day = settings.day(of: event.timestamp, start: start.start), !old.contains(day), !new.contains(day),
                        settings.isActive(event.event)
                    else { continue }
                    new.append(day)
                }
                guard !new.isEmpty else { continue }
                new.sort()
                let key = PersonKey(app: person.app, person: person.person, funnel: start.funnel)
                updated.append((key, start.cohortDay, Set(old).union(new).sorted()))
                if start.isCounted {
                    Tally.update(&change.added[FunnelDay(funnel: start.funnel, day: start.cohortDay)]) {
                        $0.counts.addRetained(start: start.start, completed: start.completed, days: new)
                    }
                }
            }
        }
        guard !updated.isEmpty else { return }
        try c.executeScript(
            """
            CREATE TEMP TABLE retention_updates (app text, person_id text, funnel text, cohort_day date, retained_days integer[])
            ON COMMIT DROP
            """)
        try c.copyIn("COPY retention_updates FROM STDIN") { writer in
            // In primary-key order, as `TouchedPersons.sorted` says why.
            for (key, day, days) in updated.sorted(by: { ($0.0.app, $0.0.person, $0.0.funnel) < ($1.0.app, $1.0.person, $1.0.funnel) }) {
                try writer.writeRow([.text(key.app), .text(key.person), .text(key.funnel), .text(day), .intArray(days)])
            }
        }
        try c.query(
            """
            INSERT INTO funnel_person_retention (app, person_id, funnel, cohort_day, retained_days)
            SELECT app, person_id, funnel, cohort_day, retained_days FROM retention_updates
            ON CONFLICT (app, person_id, funnel) DO UPDATE SET retained_days = excluded.retained_days
            """)
        try c.query("DROP TABLE retention_updates")
    }

    private struct PersonKey: Hashable {
        let app: String
        let person: String
        let funnel: String
    }

    /// Days whose next pending person has become eligible since they were written.
    func daysDue(_ c: Connection, funnels: [Funnel], now: Int64) throws -> [String: Set<String>] {
        var days: [String: Set<String>] = [:]
        try c.forEachRow(
            "SELECT DISTINCT funnel, cohort_day::text FROM funnel_retention WHERE funnel = ANY($1::text[]) AND next_eligible_after < $2",
            [.textArray(funnels.map(\.name)), .microseconds(now)]
        ) { row in days[try row.decode(String.self, at: 0), default: []].insert(try row.decode(String.self, at: 1)) }
        return days
    }

    func storedDays(_ c: Connection, funnels: [Funnel], days: Set<FunnelDay>) throws -> [String: [String: any AnalysisTally]] {
        guard !days.isEmpty else { return [:] }
        return try Self.stored(c, days: days).mapValues { $0.mapValues { Tally(counts: $0) } }
    }

    func rewriteDays(
        into writes: inout DayWrites, funnel: Funnel, days: [String], counted: [String: any AnalysisTally],
        stored: [String: any AnalysisTally], change: StoredDayChange?, now: Int64
    ) throws {
        let counts = dayTallies(stored, empty: Tally(), funnel: funnel, days: days, counted: counted, change: change).mapValues(\.counts)
        deleteDays(&writes, funnel: funnel, days: days)
        let head: [PostgresValue] = [.text(funnel.name), .text(funnel.app)]
        let retentionDays = settings[funnel.name]?.days ?? RetentionSettings.defaultDays
        // In COPY's binary form: a day's arrays hold every start time of the
        // day, and as text PostgreSQL parsed each of them back.
        let startsCopy = "COPY funnel_retention_starts (funnel, app, cohort_day, completed, day_n, start_us) FROM STDIN (FORMAT binary)"
        try writes.copy(binary: startsCopy) { starts in
            for (day, counts) in counts {
                guard let dayNumber = CohortCalendar.dayNumber(ofText: day) else {
                    throw ProjectionError(code: .unwritable, description: "funnel \(funnel.name): cohort day \(day) is not a date")
                }
                for (completed, side) in [(true, counts.completers), (false, counts.nonCompleters)] where !side.starts.isEmpty {
                    for (n, values) in [(-1, side.starts)] + side.retained.sorted(by: { $0.key < $1.key }) where !values.isEmpty {
                        starts.startRow(fields: 6)
                        let written = starts.append(text: funnel.name) && starts.append(text: funnel.app)
                        starts.append(date: dayNumber)
                        starts.append(bool: completed)
                        starts.append(int32: Int32(truncatingIfNeeded: n))
                        starts.append(int8Array: values.sorted())
                        guard written else {
                            throw ProjectionError(code: .unwritable, description: "funnel \(funnel.name): its name or app holds a NUL byte")
                        }
                    }
                }
            }
        }
        try writes.copy(
            """
            COPY funnel_retention (funnel, app, cohort_day, day_n, completed, eligible, retained, pending, computed_at, next_eligible_after)
            FROM STDIN
            """
        ) { w in
            for (day, counts) in counts where !counts.completers.starts.isEmpty || !counts.nonCompleters.starts.isEmpty {
                for cell in counts.cells(days: retentionDays, now: now) {
                    try w.append(head + [
                        .text(day), .int(Int64(cell.day)), .bool(cell.completed), .int(Int64(cell.counts.eligible)),
                        .int(Int64(cell.counts.retained)), .int(Int64(cell.counts.pending)), .microseconds(now),
                        cell.nextEligibleAfter.map(PostgresValue.microseconds) ?? .null,
                    ])
                }
            }
        }
    }

    /// The stored start times of `days`, per funnel and cohort day.
    static func stored(_ c: Connection, days: Set<FunnelDay>) throws -> [String: [String: RetentionCounts]] {
        var counts: [String: [String: RetentionCounts]] = [:]
        // In binary: the starts are arrays of microseconds, as text a string each.
        try c.forEachBinaryRow(
            "SELECT funnel, cohort_day::text, completed, day_n, start_us FROM funnel_retention_starts WHERE \(FunnelDay.anyOf)",
            FunnelDay.parameters(days)
        ) { row in
            let funnel = try row.required(0, row.text), day = try row.required(1, row.text)
            let completed = try row.required(2, row.bool), n = try row.required(3, row.int)
            let starts = try row.required(4, row.integers).compactMap { $0 }
            var side = RetentionCounts.Side()
            if n < 0 { side.starts = starts } else { side.retained[n] = starts }
            counts[funnel, default: [:]][day, default: RetentionCounts()].merge(
                completed ? RetentionCounts(completers: side) : RetentionCounts(nonCompleters: side))
        }
        return counts
    }

    /// Hands `body` each counted person (window closed, not excluded, at
    /// step 1 or beyond) of `from` (the code's own text, naming
    /// `funnel_persons p`) that `filter` picks, with their funnel day, start,
    /// outcome and retention days.
    func forEachCounted(
        _ c: Connection, from: String, where filter: String, _ parameters: [PostgresValue],
        _ body: (FunnelDay, Int64, Bool, [Int]) throws -> Void
    ) throws {
        try c.forEachBinaryRow(
            """
            SELECT p.funnel, p.cohort_day::text, p.start_time, p.completed, r.retained_days
            FROM \(from)
            LEFT JOIN funnel_person_retention r ON r.app = p.app AND r.person_id = p.person_id AND r.funnel = p.funnel
            WHERE \(filter) AND p.level >= 1 AND NOT p.excluded
            """, parameters, streaming: true
        ) { row in
            let funnel = try row.required(0, row.text)
            guard settings[funnel] != nil else { return }  // no longer configured
            try body(
                FunnelDay(funnel: funnel, day: try row.required(1, row.text)), try row.required(2, row.timestamp),
                try row.required(3, row.bool), try Self.retainedDays(row, at: 4))
        }
    }

    /// A `retained_days` column (NULL: a person with no record, active on no retention day).
    static func retainedDays(_ row: BinaryRow, at column: Int) throws -> [Int] {
        (try row.integers(column) ?? []).compactMap { $0.map(Int.init) }
    }
}
