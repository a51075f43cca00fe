import Funnels
import LibPQ

/// One person's outcome in one funnel, as the evaluator produced it: what
/// every per-person analysis is fed, with the person's history.
struct EvaluatedFunnel {
    let person: String
    let funnel: Funnel
    let outcome: PersonOutcome
    /// The cohort day, as `CohortCalendar.dayNumber` gives it, in the funnel's zone.
    let cohortDay: Int64
}

/// What a per-person analysis adds up per funnel and cohort day while a run
/// evaluates: the workers' parts are merged, so it must add.
protocol AnalysisTally: Sendable {
    /// Nothing counted.
    init()
    mutating func merge(_ other: any AnalysisTally)
    /// Takes out persons it holds.
    mutating func subtract(_ other: any AnalysisTally)
}

extension AnalysisTally {
    /// Changes a day's tally (nil before the day's first person) in place:
    /// it leaves the existential while `body` changes it, so its counts have
    /// one owner and adding to them copies nothing.
    static func update(_ tally: inout (any AnalysisTally)?, _ body: (inout Self) -> Void) {
        var day = tally as? Self ?? Self()
        tally = nil
        body(&day)
        tally = day
    }
}

/// A day's counts as the job's workers carry and merge them.
struct DayTally<Counts: DayCounts>: AnalysisTally {
    var counts = Counts()

    init() {}

    init(counts: Counts) {
        self.counts = counts
    }

    mutating func merge(_ other: any AnalysisTally) {
        if let other = other as? Self { counts.merge(other.counts) }
    }

    mutating func subtract(_ other: any AnalysisTally) {
        if let other = other as? Self { counts.subtract(other.counts) }
    }
}

/// How an incremental run changes an analysis's stored days before it
/// evaluates anyone: the touched persons' stored part leaves their days, and
/// persons whose window closes in place join theirs.
struct StoredDayChange: Sendable {
    var removed: [FunnelDay: any AnalysisTally] = [:]
    var added: [FunnelDay: any AnalysisTally] = [:]
}

/// A per-person analysis: how the job stores an analysis (a
/// `FunnelAnalysis`, which query time counts too), a stage of its pipeline
/// after the funnel evaluator. For every recomputed person and every funnel they started (or
/// were excluded from), it is handed the outcome and the person's events, and
/// writes rows to its own table, keyed like `funnel_persons` by app, person
/// and funnel. Both plans serve it alike: a rebuild empties its table, an
/// incremental run deletes the recomputed persons' rows before they are
/// written again. Adding one is adding a type, its table (a migration) and
/// an entry in `StandardAnalyses.all`: the job, the plans and the report
/// address analyses by their table and never name one.
///
/// What reports add up per cohort day it keeps in day tables, counted in
/// memory while persons are evaluated (`AnalysisTally`, per funnel and day).
/// A rebuild counts every person of every day; an incremental run takes a
/// changed day's stored counts, less what its touched persons had counted
/// and plus the windows that close in place (`StoredDayChange`, read before
/// anything is deleted), plus what it counted: its cost follows the change,
/// not the size of the day.
///
/// A person whose window closes with no new events is not recomputed: the
/// run closes their `funnel_persons` row in place. So an analysis stores what
/// it finds whatever the window's state, and its readers take
/// `funnel_persons.in_progress` as the truth about the window.
protocol PersonAnalysis: FunnelAnalysis {
    /// Its table; it has `app`, `person_id` and `funnel` columns.
    var table: String { get }
    /// `COPY table (…) FROM STDIN (FORMAT binary)` for the rows `append` writes.
    var copyStatement: String { get }
    /// Appends the rows of one person's outcome in one funnel, and adds the
    /// person to `tally`, the day's (nil before the day's first person).
    func append(
        _ evaluated: EvaluatedFunnel, events: [FunnelEvent], to rows: inout BinaryCopyRows, tally: inout (any AnalysisTally)?
    ) throws
    /// Tables it keeps per funnel and cohort day (what reports add up), emptied by a rebuild.
    var dayTables: [String] { get }
    /// Days after a person's start (whole days, 0 the start's) on which it
    /// reads their activity: an incremental run looks up the stored outcomes
    /// of active persons not recomputed whose start lies that far before an
    /// activity, for `storedDayChange`.
    var activityDays: Set<Int> { get }
    /// Incremental runs: read before the touched persons' rows are deleted
    /// and windows are closed in place (`touched` is filled): what the
    /// windows closing in place add to their days (`added`). `activity`
    /// holds the persons not recomputed whose new events are activity only:
    /// an analysis that reads events past the windows updates their rows here.
    func storedDayChange(_ c: Connection, now: Int64, activity: [PersonActivity], dialect: SQLDialect) throws -> StoredDayChange
    /// Incremental runs: what the touched persons' stored rows counted in
    /// their days (`StoredDayChange.removed`), read on a session that sees
    /// them as the run found them and has them in a `touched` temp table:
    /// the snapshot reader, after the histories (its own work, while the
    /// run's session deletes), or the run's session before it deletes.
    func touchedDayParts(_ c: Connection, dialect: SQLDialect) throws -> [FunnelDay: any AnalysisTally]
    /// Cohort days of `funnels` to rewrite although the run changed nothing
    /// in them (funnel -> days): what the clock alone changes.
    func daysDue(_ c: Connection, funnels: [Funnel], now: Int64) throws -> [String: Set<String>]
    /// Incremental runs: its stored counts of `days` of `funnels` (funnel ->
    /// day -> tally), every funnel's in one read per day table, which
    /// `rewriteDays` starts from.
    func storedDays(_ c: Connection, funnels: [Funnel], days: Set<FunnelDay>) throws -> [String: [String: any AnalysisTally]]
    /// Rewrites its day tables' rows of `days` of `funnel` (into `writes`)
    /// from what the run `counted` (day -> tally), on top of the `stored`
    /// days (`storedDays`) less and plus `change` for an incremental run
    /// (nil: a rebuild, which counted everyone).
    func rewriteDays(
        into writes: inout DayTableWrites, funnel: Funnel, days: [String], counted: [String: any AnalysisTally],
        stored: [String: any AnalysisTally], change: StoredDayChange?, now: Int64
    ) throws
    /// Its part of the report of each of `funnels` (one for every funnel),
    /// from its day tables' rows `filter` picks (SQL on `funnel` and
    /// `cohort_day`, its parameters from $1).
    func reportParts(_ c: Connection, funnels: [Funnel], where filter: String, _ parameters: [PostgresValue]) throws -> [String: any ReportPart]
    /// Its part of `funnel`'s report counted again from the stored persons
    /// whose start falls in `range`: a report in another time zone than the
    /// one its days were cut in.
    func recountedReportPart(_ c: Connection, funnel: Funnel, range: CohortRange, now: Int64) throws -> (any ReportPart)?
}

/// What an analysis adds to a funnel's report, given the funnel's tally of
/// the same persons.
protocol ReportPart: Sendable {
    func fill(_ report: inout FunnelReport, tally: FunnelTally)
}

/// Cohort days `from...to` (either end open) cut in `timeZone`.
struct CohortRange: Sendable {
    var from: String?
    var to: String?
    var timeZone: String

    /// On `funnel_persons p`: the funnel ($1) and the persons whose start falls in the range ($2 to $4).
    static let persons = """
        p.funnel = $1
        AND ($2::date IS NULL OR (p.start_time AT TIME ZONE $4)::date >= $2::date)
        AND ($3::date IS NULL OR (p.start_time AT TIME ZONE $4)::date <= $3::date)
        """

    /// $1 to $4 of `persons`.
    func parameters(funnel: Funnel) -> [PostgresValue] { [.text(funnel.name), .optional(from), .optional(to), .text(timeZone)] }
}

extension PersonAnalysis {
    var dayTables: [String] { [] }
    var activityDays: Set<Int> { [] }
    func reportParts(_ c: Connection, funnels: [Funnel], where filter: String, _ parameters: [PostgresValue]) throws -> [String: any ReportPart] {
        [:]
    }
    func recountedReportPart(_ c: Connection, funnel: Funnel, range: CohortRange, now: Int64) throws -> (any ReportPart)? { nil }
    func storedDayChange(_ c: Connection, now: Int64, activity: [PersonActivity], dialect: SQLDialect) throws -> StoredDayChange {
        StoredDayChange()
    }
    func touchedDayParts(_ c: Connection, dialect: SQLDialect) throws -> [FunnelDay: any AnalysisTally] { [:] }
    func daysDue(_ c: Connection, funnels: [Funnel], now: Int64) throws -> [String: Set<String>] { [:] }
    func storedDays(_ c: Connection, funnels: [Funnel], days: Set<FunnelDay>) throws -> [String: [String: any AnalysisTally]] { [:] }
    func rewriteDays(
        into writes: inout DayTableWrites, funnel: Funnel, days: [String], counted: [String: any AnalysisTally],
        stored: [String: any AnalysisTally], change: StoredDayChange?, now: Int64
    ) throws {}

    /// The tallies `rewriteDays` writes for `days`: each day's `stored` one
    /// (none for a rebuild), less and plus the run's `change`, plus what the
    /// run `counted`.
    func dayTallies<T: AnalysisTally>(
        _ stored: [String: any AnalysisTally], empty: T, funnel: Funnel, days: [String], counted: [String: any AnalysisTally],
        change: StoredDayChange?
    ) -> [String: T] {
        var tallies = stored.compactMapValues { $0 as? T }
        for day in days {
            let key = FunnelDay(funnel: funnel.name, day: day)
            var tally = tallies[day] ?? empty
            if let removed = change?.removed[key] { tally.subtract(removed) }
            if let added = change?.added[key] { tally.merge(added) }
            if let new = counted[day] { tally.merge(new) }
            tallies[day] = tally
        }
        return tallies
    }

    /// Deletes `days` of `funnel` from every day table, before they are written again.
    func deleteDays(_ writes: inout DayTableWrites, funnel: Funnel, days: [String]) {
        for table in dayTables { writes.delete(from: table, funnel: funnel.name, days: days) }
    }

    /// The touched persons' `funnel_persons p` rows, found by key as they will be deleted.
    static func touchedOutcomes(_ dialect: SQLDialect) -> String { OutcomeStore.touched(dialect) }

    /// Deletes the rows of the persons an incremental run recomputes, of
    /// those among them who had `funnel_persons` rows (`hadOutcomes`): an
    /// analysis writes a person's row for a funnel only beside their
    /// `funnel_persons` row, so the others have none. Few touched persons
    /// have any, so probing the index for every one of them would be wasted.
    /// Rows of frozen days stay (`FrozenDays`).
    func deleteRecomputed(_ c: Connection, hadOutcomes persons: [NewEvents.Key], frozen: FrozenDays, dialect: SQLDialect) throws {
        guard !persons.isEmpty else { return }
        try c.query(
            dialect.delete(from: table, of: "unnest($1::text[], $2::text[]) AS t(app, person)", keeping: "d.cohort_day < $3::date"),
            NewEvents.Key.parameters(persons) + [frozen.parameter])
    }
}

/// The analyses every run and report has: the standard ones
/// (`StandardAnalyses`), each stored as a per-person analysis.
enum PersonAnalyses {
    static func standard(_ funnels: [Funnel]) -> [any PersonAnalysis] {
        StandardAnalyses.all(funnels).compactMap { $0 as? any PersonAnalysis }
    }
}
