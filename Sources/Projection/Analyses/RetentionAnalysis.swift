import Foundation
import Funnels
import LibPQ

/// Retention (`RetentionAnalysis`, counted as query time counts it) stored
/// by the job: each started person's retention days (the configured days
/// after their start on which they were active) go to
/// `funnel_person_retention`, and per funnel and cohort day the start times
/// of the persons counted and of those retained (`RetentionCounts`) go to
/// `funnel_retention_starts`, from which `funnel_retention` is written as
/// the run's clock sees them.
///
/// Retention reads events long after onboarding, which most of a live app's
/// events are. Those are activity (`OutcomeEvents`): an incremental run does
/// not recompute their persons but adds each activity to the person's record
/// here, one key lookup per record an activity falls on a retention day of,
/// and only the days that gained someone are rewritten. The clock changes
/// who is eligible; `funnel_retention` remembers when its next pending person
/// becomes eligible, and the days past that are rewritten from their stored
/// start times (`daysDue`).
extension RetentionAnalysis: PersonAnalysis {
    var table: String { "funnel_person_retention" }
    var copyStatement: String {
        """
        COPY funnel_person_retention (app, person_id, funnel, cohort_day, retained_days) FROM STDIN (FORMAT binary)
        """
    }
    var dayTables: [String] { ["funnel_retention_starts", "funnel_retention"] }

    /// One funnel day's start times.
    typealias Tally = DayTally<RetentionCounts>

    /// A row for every started, not excluded person active on some retention
    /// day; the day's tally counts them once their window has closed.
    func append(
        _ evaluated: EvaluatedFunnel, events: [FunnelEvent], to rows: inout BinaryCopyRows, tally: inout (any AnalysisTally)?
    ) throws {
        let funnel = evaluated.funnel, outcome = evaluated.outcome
        guard let (start, retained) = retainedDays(outcome, in: funnel, events: events) else { return }
        if outcome.windowClosed { Tally.update(&tally) { count(outcome, start: start, retained: retained, into: &$0.counts) } }
        guard !retained.isEmpty else { return }
        rows.startRow(fields: 5)
        let written = rows.append(text: funnel.app) && rows.append(text: evaluated.person) && rows.append(text: funnel.name)
        rows.append(date: evaluated.cohortDay)
        rows.append(int4Array: retained.map { Int32(truncatingIfNeeded: $0) })
        guard written else {
            throw ProjectionError.unwritable(funnel: funnel.name, person: evaluated.person, "a value holds a NUL byte")
        }
    }

    func storedDayChange(_ c: Connection, now: Int64, activity: [PersonActivity], dialect: SQLDialect) throws -> StoredDayChange {
        var change = StoredDayChange()
        // First the activity, so that windows closing in place below count
        // their persons with it.
        try record(c, activity: activity, change: &change, dialect: dialect)
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
    func touchedDayParts(_ c: Connection, dialect: SQLDialect) throws -> [FunnelDay: any AnalysisTally] {
        var parts: [FunnelDay: any AnalysisTally] = [:]
        try forEachCounted(c, from: Self.touchedOutcomes(dialect), where: OutcomeStore.windowClosed, []) { day, start, completed, retained in
            Tally.update(&parts[day]) { $0.counts.add(start: start, completed: completed, retainedDays: retained) }
        }
        return parts
    }

    /// Adds the activity of persons not recomputed to their records: the
    /// retention days it falls on join the stored ones, and a person the
    /// days count is added to the day's retained of each new one. Only the
    /// records of starts some activity falls on a retention day of are read,
    /// key by key.
    private func record(_ c: Connection, activity: [PersonActivity], change: inout StoredDayChange, dialect: SQLDialect) throws {
        var candidates: [(key: PersonKey, start: PersonActivity.Start, days: [Int])] = []
        for person in activity {
            for start in person.starts where start.level >= 1 && !start.excluded {
                guard let settings = settings[start.funnel] else { continue }
                // A few values, looked for in a short array.
                var days: [Int] = []
                for event in person.events {
                    guard let day = settings.day(of: event.timestamp, start: start.start), !days.contains(day),
                        settings.isActive(event.event)
                    else { continue }
                    days.append(day)
                }
                guard !days.isEmpty else { continue }
                candidates.append((PersonKey(app: person.app, person: person.person, funnel: start.funnel), start, days))
            }
        }
        guard !candidates.isEmpty else { return }
        // In primary-key order, as `TouchedPersons.sorted` says why.
        candidates.sort { ($0.key.app, $0.key.person, $0.key.funnel) < ($1.key.app, $1.key.person, $1.key.funnel) }
        var stored: [[Int]] = Array(repeating: [], count: candidates.count)
        try c.forEachBinaryRow(
            """
            SELECT t.n, r.retained_days
            FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(app, person, funnel, n)
            CROSS JOIN LATERAL (
                SELECT retained_days FROM funnel_person_retention r
                WHERE r.app = t.app AND r.person_id = t.person AND r.funnel = t.funnel \(dialect.fence)) r
            """,
            [.textArray(candidates.map(\.key.app)), .textArray(candidates.map(\.key.person)), .textArray(candidates.map(\.key.funnel))]
        ) { row in
            let n = try row.required(0, row.int)
            guard n >= 1, n <= candidates.count else { throw PostgresError(.unexpectedResult, message: "retention lookup returned key \(n)") }
            stored[n - 1] = try Self.retainedDays(row, at: 1)
        }
        var updated: [(PersonKey, String, [Int])] = []
        for (candidate, old) in zip(candidates, stored) {
            let new = candidate.days.filter { !old.contains($0) }.sorted()
            guard !new.isEmpty else { continue }
            let start = candidate.start
            updated.append((candidate.key, start.cohortDay, Set(old).union(new).sorted()))
            if start.isCounted {
                Tally.update(&change.added[FunnelDay(funnel: start.funnel, day: start.cohortDay)]) {
                    $0.counts.addRetained(start: start.start, completed: start.completed, days: new)
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
            for (key, day, days) in updated {
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
        into writes: inout DayTableWrites, funnel: Funnel, days: [String], counted: [String: any AnalysisTally],
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

    /// A funnel's retention table, from its days' cells.
    struct Part: ReportPart {
        let report: RetentionReport

        func fill(_ report: inout FunnelReport, tally: FunnelTally) { report.retention = self.report }
    }

    /// The cells as the last run counted them (`funnel_retention`).
    func reportParts(_ c: Connection, funnels: [Funnel], where filter: String, _ parameters: [PostgresValue]) throws -> [String: any ReportPart] {
        var cells: [String: [String: [RetentionCell]]] = [:]
        try c.forEachBinaryRow(
            "SELECT funnel, cohort_day::text, day_n, completed, eligible, retained, pending FROM funnel_retention WHERE \(filter)", parameters
        ) { row in
            let counts = RetentionSide(
                eligible: try row.required(4, row.int), retained: try row.required(5, row.int), pending: try row.required(6, row.int))
            cells[try row.required(0, row.text), default: [:]][try row.required(1, row.text), default: []].append(
                RetentionCell(day: try row.required(2, row.int), completed: try row.required(3, row.bool), counts: counts))
        }
        return Dictionary(funnels.map { funnel in
            (funnel.name, Part(report: RetentionReport(days: funnel.retention.days, cells: cells[funnel.name] ?? [:])) as any ReportPart)
        }) { first, _ in first }
    }

    /// From the persons, counted at `now`.
    func recountedReportPart(_ c: Connection, funnel: Funnel, range: CohortRange, now: Int64) throws -> (any ReportPart)? {
        var days: [String: RetentionCounts] = [:]
        let zone = TimeZone(identifier: range.timeZone) ?? .gmt
        try forEachCounted(
            c, from: "funnel_persons p", where: "\(CohortRange.persons) AND \(OutcomeStore.windowClosed)", range.parameters(funnel: funnel)
        ) { _, start, completed, retained in
            days[CohortCalendar.day(of: start, in: zone), default: RetentionCounts()]
                .add(start: start, completed: completed, retainedDays: retained)
        }
        return Part(report: RetentionReport(days: funnel.retention.days, cells: days.mapValues { $0.cells(days: funnel.retention.days, now: now) }))
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
