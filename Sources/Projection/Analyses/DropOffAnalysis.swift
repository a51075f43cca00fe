import Funnels
import LibPQ

/// Drop-off diagnostics (`DropOffAnalysis`, counted as query time counts
/// them) stored by the job: each person's `DropOffFacts` go to
/// `funnel_person_diagnostics`, and per funnel and cohort day the lingering
/// times, next events and drivers' 2×2 counts (`DropOffCounts`) go to the
/// day tables reports add up, counted as persons are evaluated. An
/// incremental run starts from a changed day's stored counts, less its
/// touched persons' and plus the windows closing in place, both read back
/// from their rows (`funnel_persons`, which says whose window has closed,
/// with their facts) before anything is deleted.
extension DropOffAnalysis: PersonAnalysis {
    var table: String { "funnel_person_diagnostics" }
    var copyStatement: String {
        """
        COPY funnel_person_diagnostics (app, person_id, funnel, cohort_day, lingering_us, next_label, label_steps, labels)
        FROM STDIN (FORMAT binary)
        """
    }
    var dayTables: [String] { ["funnel_step_lingering", "funnel_dropoff_next", "funnel_driver_counts"] }

    /// One funnel day's counts.
    typealias Tally = DayTally<DropOffCounts>

    /// A row when there is something to say (the person did not complete,
    /// or did something between steps); the day's tally counts the person
    /// once their window has closed.
    func append(
        _ evaluated: EvaluatedFunnel, events: [FunnelEvent], to rows: inout BinaryCopyRows, tally: inout (any AnalysisTally)?
    ) throws {
        let funnel = evaluated.funnel, outcome = evaluated.outcome
        guard let (facts, shape) = facts(outcome, in: funnel, events: events) else { return }
        Tally.update(&tally) { $0.counts.add(outcome, facts: facts, required: shape.required) }
        guard facts.lingering != nil || !facts.labels.isEmpty else { return }
        rows.startRow(fields: 8)
        var written = rows.append(text: funnel.app) && rows.append(text: evaluated.person) && rows.append(text: funnel.name)
        rows.append(date: evaluated.cohortDay)
        rows.append(int64: facts.lingering)
        if let next = facts.nextLabel { written = written && rows.append(text: next) } else { rows.appendNull() }
        rows.append(int4Array: facts.labels.map { Int32(truncatingIfNeeded: $0.stepIndex + 1) })
        written = written && rows.append(textArray: facts.labels.map(\.label))
        guard written else {
            throw ProjectionError.unwritable(funnel: funnel.name, person: evaluated.person, "a value holds a NUL byte")
        }
    }

    func touchedDayParts(_ c: Connection, dialect: SQLDialect) throws -> [FunnelDay: any AnalysisTally] {
        var parts: [FunnelDay: any AnalysisTally] = [:]
        try Self.forEachCounted(c, from: Self.touchedOutcomes(dialect), where: OutcomeStore.windowClosed, [], shapes: shapes) { day, add in add(&parts[day]) }
        return parts
    }

    func storedDayChange(_ c: Connection, now: Int64, activity: [PersonActivity], dialect: SQLDialect) throws -> StoredDayChange {
        var change = StoredDayChange()
        // Those whose window closes in place (as `OutcomeStore.closeWindows` picks them) will count.
        try Self.forEachCounted(
            c, from: "funnel_persons p",
            where: OutcomeStore.closingInPlace, [.microseconds(now)], shapes: shapes
        ) { day, add in add(&change.added[day]) }
        return change
    }

    func storedDays(_ c: Connection, funnels: [Funnel], days: Set<FunnelDay>) throws -> [String: [String: any AnalysisTally]] {
        guard !days.isEmpty else { return [:] }
        return try Self.stored(c, funnels: funnels, where: FunnelDay.anyOf, FunnelDay.parameters(days))
            .mapValues { $0.mapValues { Tally(counts: $0) } }
    }

    func rewriteDays(
        into writes: inout DayTableWrites, funnel: Funnel, days: [String], counted: [String: any AnalysisTally],
        stored: [String: any AnalysisTally], change: StoredDayChange?, now: Int64
    ) throws {
        let counts = dayTallies(stored, empty: Tally(), funnel: funnel, days: days, counted: counted, change: change).mapValues(\.counts)
        deleteDays(&writes, funnel: funnel, days: days)
        try Self.write(&writes, funnel: funnel, counts: counts)
    }

    /// A funnel's drop-off diagnostics, from the counts of its days.
    struct Part: ReportPart {
        let funnel: Funnel
        let counts: DropOffCounts

        func fill(_ report: inout FunnelReport, tally: FunnelTally) {
            report.diagnostics = DropOffDiagnostics(funnel: funnel, tally: tally, counts: counts)
        }
    }

    /// The counts of every day in the range, the next steps' and drivers'
    /// added up by PostgreSQL (`acrossDays`): a row per label and candidate,
    /// not per day as well.
    func reportParts(_ c: Connection, funnels: [Funnel], where filter: String, _ parameters: [PostgresValue]) throws -> [String: any ReportPart] {
        let stored = try Self.stored(c, funnels: funnels, where: filter, parameters, acrossDays: true)
        return Dictionary(funnels.map { funnel in
            (funnel.name, Part(funnel: funnel, counts: DropOffCounts(adding: (stored[funnel.name] ?? [:]).values)) as any ReportPart)
        }) { first, _ in first }
    }

    func recountedReportPart(_ c: Connection, funnel: Funnel, range: CohortRange, now: Int64) throws -> (any ReportPart)? {
        var tally: (any AnalysisTally)?
        try Self.forEachCounted(
            c, from: "funnel_persons p", where: "\(CohortRange.persons) AND \(OutcomeStore.windowClosed)", range.parameters(funnel: funnel),
            shapes: [funnel.name: DropOffFacts.Shape(funnel)]
        ) { _, add in add(&tally) }
        return Part(funnel: funnel, counts: (tally as? Tally)?.counts ?? DropOffCounts())
    }

    /// Hands `body` each counted person (window closed, not
    /// excluded, at step 1 or beyond) of `from` (the code's own text, naming
    /// `funnel_persons p`) that `filter` picks, with its funnel day and a
    /// function adding the person to a tally.
    static func forEachCounted(
        _ c: Connection, from: String, where filter: String, _ parameters: [PostgresValue], shapes: [String: DropOffFacts.Shape],
        _ body: (FunnelDay, (inout (any AnalysisTally)?) -> Void) throws -> Void
    ) throws {
        try c.forEachBinaryRow(
            """
            SELECT p.funnel, p.cohort_day::text, p.level, p.completed, p.breakdown,
                   d.lingering_us, d.next_label, d.label_steps, d.labels
            FROM \(from)
            LEFT JOIN funnel_person_diagnostics d ON d.app = p.app AND d.person_id = p.person_id AND d.funnel = p.funnel
            WHERE \(filter) AND p.level >= 1 AND NOT p.excluded
            """, parameters, streaming: true
        ) { row in
            let funnel = try row.required(0, row.text)
            guard let shape = shapes[funnel] else { return }  // no longer configured
            let steps = (try row.integers(7) ?? []).map { Int($0 ?? 0) - 1 }
            let labels = try row.texts(8) ?? []
            let facts = DropOffFacts(
                lingering: try row.int(5).map(Int64.init), nextLabel: try row.text(6),
                labels: zip(steps, labels).map { DropOffFacts.Label(stepIndex: $0, label: $1 ?? "") })
            let level = try row.required(2, row.int), completed = try row.required(3, row.bool)
            let breakdown = OutcomeStore.parseObject(try row.required(4, row.json))
            try body(FunnelDay(funnel: funnel, day: try row.required(1, row.text))) { tally in
                Tally.update(&tally) {
                    $0.counts.add(level: level, completed: completed, breakdown: breakdown, facts: facts, required: shape.required)
                }
            }
        }
    }

    /// The stored counts of the days of `funnels` that `filter` (over the
    /// day tables' columns, `funnel` among them; parameters from $1) picks,
    /// per funnel and cohort day: one statement per table for them all.
    /// `acrossDays`: the days' counts added up, under one day `""`.
    static func stored(
        _ c: Connection, funnels: [Funnel], where filter: String, _ parameters: [PostgresValue], acrossDays: Bool = false
    ) throws -> [String: [String: DropOffCounts]] {
        let day = acrossDays ? "''::text" : "cohort_day::text"
        func sum(_ column: String) -> String { acrossDays ? "sum(\(column))::int8" : column }
        func grouped(_ columns: String) -> String { acrossDays ? " GROUP BY \(columns)" : "" }
        var days: [String: [String: DropOffCounts]] = [:]
        let required = Dictionary(funnels.map { ($0.name, $0.requiredStepIndices) }) { first, _ in first }
        // In binary: as text each lingering time is a string to parse, and
        // each of the driver counts' rows a string per value.
        try c.forEachBinaryRow(
            "SELECT funnel, \(day), step_index, lingering_us FROM funnel_step_lingering WHERE \(filter)", parameters
        ) { row in
            days[try row.required(0, row.text), default: [:]][try row.required(1, row.text), default: DropOffCounts()]
                .lingering[try row.required(2, row.int) - 1, default: []]
                += (try row.integers(3) ?? []).compactMap { $0 }
        }
        try c.forEachBinaryRow(
            "SELECT funnel, \(day), step_index, label, \(sum("persons")) FROM funnel_dropoff_next WHERE \(filter)"
                + grouped("funnel, step_index, label"), parameters
        ) { row in
            days[try row.required(0, row.text), default: [:]][try row.required(1, row.text), default: DropOffCounts()]
                .next[try row.required(2, row.int) - 1, default: [:]][try row.required(3, row.text), default: 0]
                += try row.required(4, row.int)
        }
        try c.forEachBinaryRow(
            """
            SELECT funnel, \(day), from_index, kind, dimension, value, \(sum("converted")), \(sum("dropped"))
            FROM funnel_driver_counts WHERE \(filter)
            """ + grouped("funnel, from_index, kind, dimension, value"), parameters
        ) { row in
            let funnel = try row.required(0, row.text)
            guard let required = required[funnel] else { return }
            let day = try row.required(1, row.text), step = try row.required(2, row.int) - 1
            let pair = DropOffCounts.Pair(converted: try row.required(6, row.int), dropped: try row.required(7, row.int))
            guard let kind = DropOffDiagnostics.Kind(rawValue: try row.required(3, row.text)) else {
                days[funnel, default: [:]][day, default: DropOffCounts()].transitions[step, default: .init()].add(pair)
                return
            }
            let dimension = try row.required(4, row.text), value = try row.required(5, row.text)
            if kind == .breakdown {
                guard let position = required.firstIndex(of: step), position + 1 < required.count else { return }
                // Added in place: taken out and put back, the pairs were copied for each row.
                let key = DropOffCounts.BreakdownValue(dimension: dimension, value: value)
                days[funnel, default: [:]][day, default: DropOffCounts()]
                    .breakdowns[key, default: Array(repeating: DropOffCounts.Pair(), count: required.count - 1)][position].add(pair)
                return
            }
            let candidate = DropOffCounts.Candidate(stepIndex: step, kind: kind, dimension: dimension, value: value)
            days[funnel, default: [:]][day, default: DropOffCounts()].candidates[candidate, default: .init()].add(pair)
        }
        return days
    }

    /// Appends the day tables' rows of `counts` (cohort day -> counts).
    static func write(_ writes: inout DayTableWrites, funnel: Funnel, counts: [String: DropOffCounts]) throws {
        let required = funnel.requiredStepIndices
        let next = Dictionary(uniqueKeysWithValues: zip(required, required.dropFirst()))
        func name(_ step: Int) -> PostgresValue { .text(funnel.rowName(step)) }
        let head: [PostgresValue] = [.text(funnel.name), .text(funnel.app)]
        try writes.copy("COPY funnel_step_lingering (funnel, app, cohort_day, step_index, step_name, dropped, lingering_us) FROM STDIN") { w in
            for (day, counts) in counts {
                for (step, values) in counts.lingering {
                    try w.append(head + [.text(day), .int(Int64(step + 1)), name(step), .int(Int64(values.count)),
                                          .intArray(values.sorted())])
                }
            }
        }
        try writes.copy("COPY funnel_dropoff_next (funnel, app, cohort_day, step_index, step_name, label, persons) FROM STDIN") { w in
            for (day, counts) in counts {
                for (step, labels) in counts.next {
                    for (label, persons) in labels {
                        try w.append(head + [.text(day), .int(Int64(step + 1)), name(step), .text(label), .int(Int64(persons))])
                    }
                }
            }
        }
        try writes.copy(
            "COPY funnel_driver_counts (funnel, app, cohort_day, from_index, to_index, kind, dimension, value, converted, dropped) FROM STDIN"
        ) { w in
            func row(_ day: String, _ step: Int, _ kind: String, _ dimension: String, _ value: String, _ pair: DropOffCounts.Pair) throws {
                guard let to = next[step] else { return }
                try w.append(head + [.text(day), .int(Int64(step + 1)), .int(Int64(to + 1)), .text(kind), .text(dimension), .text(value),
                                       .int(Int64(pair.converted)), .int(Int64(pair.dropped))])
            }
            for (day, counts) in counts {
                for (step, pair) in counts.transitions { try row(day, step, "all", "", "", pair) }
                for (candidate, pair) in counts.allCandidates(required: required) {
                    try row(day, candidate.stepIndex, candidate.kind.rawValue, candidate.dimension, candidate.value, pair)
                }
            }
        }
    }
}
