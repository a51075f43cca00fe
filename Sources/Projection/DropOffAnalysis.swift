import Funnels
import LibPQ

/// Why persons drop off (SPEC §10), as a per-person analysis: each person's
/// `DropOffFacts` go to `funnel_person_diagnostics`, and per funnel and
/// cohort day the lingering times, next events and drivers' 2×2 counts
/// (`DropOffCounts`) go to the day tables reports add up. A rebuild counts
/// the days in memory as it evaluates; an incremental run reads the changed
/// days' persons back (`funnel_persons`, which says whose window has closed,
/// with their facts) and counts them the same way.
struct DropOffAnalysis: PersonAnalysis {
    let table = "funnel_person_diagnostics"
    let copyStatement = """
        COPY funnel_person_diagnostics (app, person_id, funnel, cohort_day, lingering_us, next_label, label_steps, labels)
        FROM STDIN (FORMAT binary)
        """
    let dayTables = ["funnel_step_lingering", "funnel_dropoff_next", "funnel_driver_counts"]
    private let shapes: [String: DropOffFacts.Shape]

    init(funnels: [Funnel]) {
        shapes = Dictionary(funnels.map { ($0.name, DropOffFacts.Shape($0)) }, uniquingKeysWith: { first, _ in first })
    }

    /// One funnel day's counts.
    struct Tally: AnalysisTally {
        var counts = DropOffCounts()

        mutating func merge(_ other: any AnalysisTally) {
            if let other = other as? Tally { counts.merge(other.counts) }
        }
    }

    /// A row when there is something to say (the person did not complete,
    /// or did something between steps); the day's tally counts the person
    /// once their window has closed.
    func append(
        _ evaluated: EvaluatedFunnel, events: [FunnelEvent], to rows: inout BinaryCopyRows, tally: inout (any AnalysisTally)?
    ) throws {
        let funnel = evaluated.funnel, outcome = evaluated.outcome
        guard let shape = shapes[funnel.name], let facts = DropOffFacts.of(outcome, in: funnel, shape: shape, events: events) else {
            return
        }
        if !outcome.inProgress || outcome.completed {
            var day = tally as? Tally ?? Tally()
            tally = nil  // the counts' only owner is `day` now, so adding to them copies nothing
            day.counts.add(
                level: outcome.level, completed: outcome.completed, breakdown: outcome.breakdown, facts: facts, required: shape.required)
            tally = day
        }
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

    func rewriteDays(_ c: Connection, funnel: Funnel, days: [String], counted: [String: any AnalysisTally]?) throws {
        let counts = try counted?.compactMapValues { ($0 as? Tally)?.counts }
            ?? Self.readBack(c, funnel: funnel, where: "p.cohort_day = ANY($2::date[])", [.textArray(days)])
        let parameters: [PostgresValue] = [.text(funnel.name), .textArray(days)]
        for table in dayTables {
            try c.query("DELETE FROM \(table) WHERE funnel = $1 AND cohort_day = ANY($2::date[])", parameters)
        }
        try Self.write(c, funnel: funnel, counts: counts)
    }

    /// The counts per cohort day of the persons of `funnel` that `filter`
    /// (the code's own text over `funnel_persons p`, with parameters from $2)
    /// picks, counted from their stored rows.
    static func readBack(_ c: Connection, funnel: Funnel, where filter: String, _ parameters: [PostgresValue]) throws -> [String: DropOffCounts] {
        let required = funnel.requiredStepIndices
        var days: [String: DropOffCounts] = [:]
        try c.forEachRow(
            """
            SELECT p.cohort_day::text, p.level, p.completed, p.breakdown, d.lingering_us, d.next_label, d.label_steps, d.labels
            FROM funnel_persons p
            LEFT JOIN funnel_person_diagnostics d ON d.app = p.app AND d.person_id = p.person_id AND d.funnel = p.funnel
            WHERE p.funnel = $1 AND \(filter) AND p.level >= 1 AND NOT p.in_progress AND NOT p.excluded
            """, [.text(funnel.name)] + parameters
        ) { row in
            let steps = (try row.decode(PostgresArrayText?.self, at: 6)?.integers() ?? []).map { Int($0 ?? 0) - 1 }
            let labels = try row.decode(PostgresArrayText?.self, at: 7)?.elements ?? []
            let facts = DropOffFacts(
                lingering: try row.decode(Int64?.self, at: 4), nextLabel: try row.decode(String?.self, at: 5),
                labels: zip(steps, labels).map { DropOffFacts.Label(stepIndex: $0, label: $1 ?? "") })
            days[try row.decode(String.self, at: 0), default: DropOffCounts()].add(
                level: try row.decode(Int.self, at: 1), completed: try row.decode(Bool.self, at: 2),
                breakdown: OutcomeStore.parseObject(try row.decode(PostgresJSON.self, at: 3)), facts: facts, required: required)
        }
        return days
    }

    /// Appends the day tables' rows of `counts` (cohort day -> counts).
    static func write(_ c: Connection, funnel: Funnel, counts: [String: DropOffCounts]) throws {
        let required = funnel.requiredStepIndices
        let next = Dictionary(uniqueKeysWithValues: zip(required, required.dropFirst()))
        func name(_ step: Int) -> PostgresValue { .text(funnel.steps.indices.contains(step) ? funnel.steps[step].name : "") }
        let head: [PostgresValue] = [.text(funnel.name), .text(funnel.app)]
        try c.copyIn("COPY funnel_step_lingering (funnel, app, cohort_day, step_index, step_name, dropped, lingering_us) FROM STDIN") { w in
            for (day, counts) in counts {
                for (step, values) in counts.lingering {
                    try w.writeRow(head + [.text(day), .int(Int64(step + 1)), name(step), .int(Int64(values.count)),
                                          .text("{" + values.sorted().map(String.init).joined(separator: ",") + "}")])
                }
            }
        }
        try c.copyIn("COPY funnel_dropoff_next (funnel, app, cohort_day, step_index, step_name, label, persons) FROM STDIN") { w in
            for (day, counts) in counts {
                for (step, labels) in counts.next {
                    for (label, persons) in labels {
                        try w.writeRow(head + [.text(day), .int(Int64(step + 1)), name(step), .text(label), .int(Int64(persons))])
                    }
                }
            }
        }
        try c.copyIn(
            "COPY funnel_driver_counts (funnel, app, cohort_day, from_index, to_index, kind, dimension, value, converted, dropped) FROM STDIN"
        ) { w in
            func row(_ day: String, _ step: Int, _ kind: String, _ dimension: String, _ value: String, _ pair: DropOffCounts.Pair) throws {
                guard let to = next[step] else { return }
                try w.writeRow(head + [.text(day), .int(Int64(step + 1)), .int(Int64(to + 1)), .text(kind), .text(dimension), .text(value),
                                       .int(Int64(pair.converted)), .int(Int64(pair.dropped))])
            }
            for (day, counts) in counts {
                for (step, pair) in counts.transitions { try row(day, step, "all", "", "", pair) }
                for (candidate, pair) in counts.candidates {
                    try row(day, candidate.stepIndex, candidate.kind.rawValue, candidate.dimension, candidate.value, pair)
                }
            }
        }
    }
}
