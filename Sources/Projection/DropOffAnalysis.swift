import Funnels
import LibPQ

/// Why persons drop off (SPEC §10), as a per-person analysis: each person's
/// `DropOffFacts` go to `funnel_person_diagnostics`; per cohort day, the
/// lingering times, next events and drivers' 2×2 counts are summed from
/// those rows and `funnel_persons` (which says whose window has closed) into
/// the day tables reports add up, in PostgreSQL, for the days a run changed.
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

    /// A row when there is something to say: the person did not complete, or
    /// did something between steps.
    func append(_ evaluated: EvaluatedFunnel, events: [FunnelEvent], to rows: inout BinaryCopyRows) throws {
        let funnel = evaluated.funnel
        guard let shape = shapes[funnel.name],
              let facts = DropOffFacts.of(evaluated.outcome, in: funnel, shape: shape, events: events),
              facts.lingering != nil || !facts.labels.isEmpty
        else { return }
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

    func rewriteDays(_ c: Connection, funnel: Funnel, days: [String]) throws {
        let parameters: [PostgresValue] = [.text(funnel.name), .textArray(days)]
        for table in dayTables {
            try c.query("DELETE FROM \(table) WHERE funnel = $1 AND cohort_day = ANY($2::date[])", parameters)
        }
        let filter = "p.funnel = $1 AND p.cohort_day = ANY($2::date[])"
        try c.query("INSERT INTO funnel_step_lingering \(Self.lingering(filter))", parameters)
        try c.query("INSERT INTO funnel_dropoff_next \(Self.next(filter))", parameters)
        try c.query(
            "INSERT INTO funnel_driver_counts \(Self.drivers(filter, required: "$3::int[]"))",
            parameters + [Self.requiredIndices(funnel)])
    }

    /// 1-based configured indices of the funnel's required steps, for `$n::int[]`.
    static func requiredIndices(_ funnel: Funnel) -> PostgresValue {
        .textArray(funnel.requiredStepIndices.map { String($0 + 1) })
    }

    // The day tables' rows, as SELECTs over the persons `filter` (the code's
    // own text over `funnel_persons p`) picks: what a run stores for the days
    // it rewrites, and what a report in another time zone adds up directly.

    /// Those who dropped, window closed, not excluded.
    private static let dropped = "NOT p.completed AND NOT p.in_progress AND NOT p.excluded"
    private static let joined = """
        funnel_persons p
        JOIN funnel_person_diagnostics d ON d.app = p.app AND d.person_id = p.person_id AND d.funnel = p.funnel
        """

    /// (funnel, app, cohort_day, step_index, step_name, dropped, lingering_us)
    static func lingering(_ filter: String) -> String {
        """
        SELECT p.funnel, p.app, p.cohort_day, p.last_step_index, p.last_step_name, count(*),
               array_agg(d.lingering_us ORDER BY d.lingering_us)
        FROM \(joined)
        WHERE \(filter) AND \(dropped)
        GROUP BY p.funnel, p.app, p.cohort_day, p.last_step_index, p.last_step_name
        """
    }

    /// (funnel, app, cohort_day, step_index, step_name, label, persons)
    static func next(_ filter: String) -> String {
        """
        SELECT p.funnel, p.app, p.cohort_day, p.last_step_index, p.last_step_name,
               COALESCE(d.next_label, '\(DropOffFacts.noFurtherEvents)') AS label, count(*)
        FROM \(joined)
        WHERE \(filter) AND \(dropped)
        GROUP BY p.funnel, p.app, p.cohort_day, p.last_step_index, p.last_step_name, label
        """
    }

    /// (funnel, app, cohort_day, from_index, to_index, kind, dimension, value,
    /// converted, dropped); `required` is the funnel's `requiredIndices`.
    /// Transition k (1-based among required steps) counts persons at level ≥ k
    /// whose window closed, not excluded: converted past it, or dropped at it.
    static func drivers(_ filter: String, required r: String) -> String {
        """
        SELECT p.funnel, p.app, p.cohort_day, (\(r))[k], (\(r))[k + 1], c.kind, c.dimension, c.value,
               count(*) FILTER (WHERE p.level > k), count(*) FILTER (WHERE p.level = k)
        FROM funnel_persons p
        CROSS JOIN LATERAL generate_series(1, least(p.level, cardinality(\(r)) - 1)) k
        CROSS JOIN LATERAL (
            SELECT 'all'::text, ''::text, ''::text
            UNION ALL SELECT 'breakdown', b.key, b.value FROM jsonb_each_text(p.breakdown) b
        ) c(kind, dimension, value)
        WHERE \(filter) AND NOT p.in_progress AND NOT p.excluded
        GROUP BY p.funnel, p.app, p.cohort_day, k, c.kind, c.dimension, c.value
        UNION ALL
        SELECT p.funnel, p.app, p.cohort_day, l.step, (\(r))[array_position(\(r), l.step) + 1], 'event', '', l.label,
               count(*) FILTER (WHERE p.last_step_index > l.step),
               count(*) FILTER (WHERE p.last_step_index = l.step AND NOT p.completed)
        FROM \(joined)
        CROSS JOIN LATERAL unnest(d.label_steps, d.labels) l(step, label)
        WHERE \(filter) AND NOT p.in_progress AND NOT p.excluded
        GROUP BY p.funnel, p.app, p.cohort_day, l.step, l.label
        """
    }
}
