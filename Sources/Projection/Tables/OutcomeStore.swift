import EventLog
import Foundation
public import Funnels
import LibPQ

/// One person's stored outcome in one funnel: a `funnel_persons` row.
public struct StoredOutcome: Sendable {
    public var personId: String
    public var cohortDay: String
    public var outcome: PersonOutcome
}

/// Reads and writes `funnel_persons`.
enum OutcomeStore {
    static let columns = """
        funnel, app, person_id, cohort_day, level, last_step_index, last_step_name, completed, in_progress, excluded,
        start_time, chain_start_time, completion_time, seconds_to_complete, step_times_us, optional_steps_done, breakdown,
        open_until
        """

    /// Deletes the rows of the touched persons and hands each one over
    /// (funnel, cohort day, outcome): the days they leave must be rewritten,
    /// and their outcomes are taken out of those days' tallies.
    /// Returns the persons who had rows (app, person id), each once.
    /// Rows of frozen days (`frozen`) are kept.
    static func deleteTouched(
        _ c: Connection, dialect: SQLDialect, frozen: FrozenDays, _ body: (String, String, PersonOutcome) throws -> Void
    ) throws -> [NewEvents.Key] {
        var persons = Set<NewEvents.Key>()
        let app = 2 + outcomeColumnNames.count  // after the funnel, the cohort day and the outcome
        // One result, not single-row mode: a day's touched persons fit in memory, and a result per row costs more.
        try c.forEachBinaryRow(
            dialect.delete(
                from: "funnel_persons", keeping: "d.cohort_day < $1::date",
                returning: "f.funnel, f.cohort_day::text, \(outcomeColumns("f.")), f.app, f.person_id"),
            [frozen.parameter]
        ) { row in
            try handOver(row, to: body)
            persons.insert(NewEvents.Key(app: try row.required(app, row.text), id: try row.required(app + 1, row.text)))
        }
        return Array(persons)
    }

    /// The touched persons' stored outcomes, as `p`: a relation of the run's `touched` table.
    static func touched(_ dialect: SQLDialect) -> String {
        """
        touched t
        CROSS JOIN LATERAL (SELECT * FROM funnel_persons p WHERE p.app = t.app AND p.person_id = t.person \(dialect.fence)) p
        """
    }

    /// On `funnel_persons p`: the window has closed (`PersonOutcome.windowClosed`),
    /// so the analyses count the person.
    static let windowClosed = "NOT p.in_progress AND p.open_until IS NULL"

    /// On `funnel_persons p`: the rows `closeWindows` closes in place at $1
    /// (the run's clock), which the analyses' `storedDayChange` add first.
    /// The touched persons are one uncorrelated subquery, which PostgreSQL
    /// hashes once and Citus runs apart from the distributed tables (it
    /// refuses a local table correlated with them).
    static let closingInPlace = """
        p.open_until <= $1 AND (p.app, p.person_id) NOT IN (SELECT t.app, t.person FROM touched t)
        """

    /// Closes in place the windows that closed since the last run, for the
    /// persons whom nothing else makes the run recompute (not in `touched`):
    /// with no new events only the window's state can change, at
    /// `open_until`: a person in progress drops off, a completer starts to
    /// count in the diagnostics and retention (`PersonOutcome.windowClosed`).
    /// Hands over each row as it now is (funnel, cohort day, outcome), so
    /// the days' tallies can follow. The cohort day's text is made outside
    /// the update: Citus allows only immutable functions in RETURNING.
    static func closeWindows(_ c: Connection, now: Int64, _ body: (String, String, PersonOutcome) throws -> Void) throws {
        try c.forEachBinaryRow(
            """
            WITH p AS (
                UPDATE funnel_persons p SET in_progress = false, open_until = NULL
                WHERE \(closingInPlace)
                RETURNING p.*)
            SELECT p.funnel, p.cohort_day::text, \(outcomeColumns("p.")) FROM p
            """, [.microseconds(now)]
        ) { row in
            try handOver(row, to: body)
        }
    }

    /// A row `f.funnel, f.cohort_day::text, outcomeColumns("f.")`, as (funnel, cohort day, outcome).
    private static func handOver(_ row: BinaryRow, to body: (String, String, PersonOutcome) throws -> Void) throws {
        try body(try row.required(0, row.text), try row.required(1, row.text), try outcome(of: row, from: 2))
    }

    /// The statement the rows of `append` are COPYed with.
    static let copyStatement = "COPY funnel_persons (\(columns)) FROM STDIN (FORMAT binary)"

    /// Appends the outcome's row, in `columns` order, with those columns'
    /// types; `day` is the cohort day as `CohortCalendar.dayNumber` gives it.
    static func append(
        _ o: PersonOutcome, funnel: Funnel, person: String, day: Int64, to rows: inout BinaryCopyRows
    ) throws {
        let required = funnel.requiredStepIndices
        let lastPosition = max(0, min(o.level, required.count) - 1)
        let lastIndex = required.isEmpty ? 0 : required[lastPosition]
        guard let level = Int32(exactly: o.level) else {
            throw ProjectionError.unwritable(funnel: funnel.name, person: person, "level \(o.level)")
        }
        rows.startRow(fields: 18)
        var written = rows.append(text: funnel.name) && rows.append(text: funnel.app) && rows.append(text: person)
        rows.append(date: day)
        rows.append(int32: level)
        rows.append(int32: Int32(truncatingIfNeeded: lastIndex + 1))
        written = written && rows.append(text: funnel.rowName(lastIndex))
        rows.append(bool: o.completed)
        rows.append(bool: o.inProgress && !o.completed)
        rows.append(bool: o.excluded)
        rows.append(timestamp: o.startTime)
        rows.append(timestamp: o.chainStartTime)
        rows.append(timestamp: o.completionTime)
        rows.append(double: o.secondsToComplete)
        rows.append(int8Array: o.stepTimes)
        rows.append(int4Array: o.optionalStepsDone.sorted().map { Int32(truncatingIfNeeded: $0 + 1) })
        written = written && rows.append(jsonb: jsonObject(o.breakdown))
        rows.append(timestamp: o.openUntil)
        guard written else {
            throw ProjectionError.unwritable(funnel: funnel.name, person: person, "a value holds a NUL byte")
        }
    }

    /// Calls `body` with each cohort day's outcomes, day by day, so only one
    /// day is in memory: a rebuild rewrites every day of every funnel.
    static func forEachDay(_ c: Connection, funnel: Funnel, days: [String], _ body: (String, [PersonOutcome]) throws -> Void) throws {
        var day: String?
        var outcomes: [PersonOutcome] = []
        try forEach(c, funnel: funnel, days: days, byDay: true) { stored in
            if stored.cohortDay != day {
                if let day { try body(day, outcomes) }
                day = stored.cohortDay
                outcomes.removeAll(keepingCapacity: true)
            }
            outcomes.append(stored.outcome)
        }
        if let day { try body(day, outcomes) }
    }

    /// Streams the outcomes of one funnel on the given cohort days (all days
    /// when nil), in no particular order unless `byDay`. Times come as
    /// timestamptz text and are parsed here, exactly: `extract(epoch …)` is
    /// numeric arithmetic per row in PostgreSQL, and was most of a report's time.
    static func forEach(
        _ c: Connection, funnel: Funnel, days: [String]?, byDay: Bool = false, _ body: (StoredOutcome) throws -> Void
    ) throws {
        let filter = days == nil ? "" : "AND cohort_day = ANY($2::date[])"
        var parameters: [PostgresValue] = [.text(funnel.name)]
        if let days { parameters.append(.textArray(days)) }
        try c.forEachBinaryRow(
            """
            SELECT person_id, cohort_day::text, \(outcomeColumns(""))
            FROM funnel_persons WHERE funnel = $1 \(filter)
            \(byDay ? "ORDER BY cohort_day" : "")
            """, parameters, streaming: true
        ) { row in
            try body(
                StoredOutcome(
                    personId: try row.required(0, row.text), cohortDay: try row.required(1, row.text),
                    outcome: try outcome(of: row, from: 2)))
        }
    }

    /// The columns `outcome(of:from:)` reads, each prefixed with `alias`.
    private static func outcomeColumns(_ alias: String) -> String {
        outcomeColumnNames.map { alias + $0 }.joined(separator: ", ")
    }

    private static let outcomeColumnNames = [
        "level", "completed", "in_progress", "excluded", "start_time", "chain_start_time", "completion_time", "step_times_us",
        "optional_steps_done", "breakdown", "open_until",
    ]

    /// The outcome in `outcomeColumns`, starting at column `first` of `row`.
    /// Read in binary: as text, each outcome's timestamps, step times and
    /// breakdown were strings to parse again.
    private static func outcome(of row: BinaryRow, from first: Int) throws -> PersonOutcome {
        let optional = try row.required(first + 8, row.integers).compactMap { $0.map { Int($0) - 1 } }
        return PersonOutcome(
            level: try row.required(first, row.int), completed: try row.required(first + 1, row.bool),
            inProgress: try row.required(first + 2, row.bool), excluded: try row.required(first + 3, row.bool),
            startTime: try row.timestamp(first + 4), chainStartTime: try row.timestamp(first + 5),
            completionTime: try row.timestamp(first + 6), stepTimes: try row.required(first + 7, row.integers),
            optionalStepsDone: Set(optional), breakdown: parseObject(try row.required(first + 9, row.json)),
            openUntil: try row.timestamp(first + 10))
    }

    /// Deterministic JSON object text (sorted keys), so rebuilds compare equal
    /// byte for byte: the event log's canonical writer, which works in bytes
    /// (it runs once per person and funnel, where JSONSerialization would be
    /// a large share of a rebuild's time).
    static func jsonObject(_ values: [String: String]) -> String {
        JSONValue.object(values.mapValues(JSONValue.string)).canonicalText
    }

    /// Reads back a flat object of strings with the event log's byte-level
    /// parser (PostgreSQL normalises jsonb spacing; the parser does not care).
    static func parseObject(_ json: String) -> [String: String] {
        guard case .object(let fields)? = try? JSONParser.parse(json.utf8) else { return [:] }
        return fields.compactMapValues(\.stringValue)
    }
}

/// A cohort day of one funnel: the unit whose report rows are rewritten.
struct FunnelDay: Hashable, Sendable {
    let funnel: String
    let day: String

    /// SQL picking a day table's rows of some funnels' cohort days, given
    /// as `parameters` ($1, $2): every funnel's days in one statement.
    static let anyOf = "(funnel, cohort_day) IN (SELECT * FROM unnest($1::text[], $2::date[]))"

    static func parameters(_ days: some Collection<FunnelDay>) -> [PostgresValue] {
        [.textArray(days.map(\.funnel)), .textArray(days.map(\.day))]
    }
}
