import Foundation
import Funnels
import LibPQ
import LogReading

/// Evaluates one app's spilled history, partition by partition, on the
/// run's worker threads while the job streams the next app: partitions hold disjoint
/// persons, so each worker renders its own rows and tallies, COPYs the rows
/// on the run's session, and the results are added up at the end. Per person, the funnel evaluator gives an outcome per funnel; the
/// outcome's `funnel_persons` row, the cohort day's tally and every
/// per-person analysis's rows are fed from it.
struct PartitionEvaluation: Sendable {
    /// What some partitions produced.
    struct Totals: Sendable {
        /// Funnel -> cohort day -> tally of every person evaluated.
        var tallies: [String: [String: FunnelTally]] = [:]
        var affected = Set<FunnelDay>()
        var persons = 0
        /// Groups evaluated for the funnels counting groups (`GroupMembership`), apart from persons.
        var groups = 0
        var events = 0
        /// Analysis (by its table) -> funnel day -> what it counted.
        var analysisTallies: [String: [FunnelDay: any AnalysisTally]] = [:]

        mutating func merge(_ other: Totals) {
            for (analysis, tallies) in other.analysisTallies {
                for (day, tally) in tallies {
                    if analysisTallies[analysis]?[day] == nil {
                        analysisTallies[analysis, default: [:]][day] = tally
                    } else {
                        analysisTallies[analysis]?[day]?.merge(tally)
                    }
                }
            }
            for (funnel, days) in other.tallies {
                for (day, tally) in days {
                    if tallies[funnel]?[day] == nil { tallies[funnel, default: [:]][day] = tally } else { tallies[funnel]?[day]?.merge(tally) }
                }
            }
            affected.formUnion(other.affected)
            persons += other.persons
            groups += other.groups
            events += other.events
        }
    }

    let funnels: [Funnel]
    let timeZones: [TimeZone]
    let shapes: [FunnelTally.Shape]
    /// The only persons to evaluate (an incremental run's); nil for all.
    let persons: Set<String>?
    let analyses: [any PersonAnalysis]
    /// The app's audiences this pass keeps (`AudienceSpanStore`): each unit evaluated gets its spans.
    let audiences: [Audience]
    let now: Int64
    /// The archive's frozen days: outcomes on them, or of a person who keeps a row there, are left out.
    let frozen: FrozenDays

    /// Starts evaluating `history` on the `workers` lane, one task per
    /// thread, and returns at once, so the job can stream the next app
    /// meanwhile; `Running.finish` waits.
    func start(
        _ history: SpilledHistory, reader: PersonHistoryReader, workers: Background, session: Connection, progress: Progress
    ) -> Running {
        let count = max(1, min(workers.count, history.partitions.count))
        let tasks = (0..<count).map { worker in
            workers.run {
                var totals = Totals()
                var spans = AudienceSpans()
                for index in stride(from: worker, to: history.partitions.count, by: count) {
                    var rows = BinaryCopyRows()
                    var analysisRows = analyses.map { _ in BinaryCopyRows() }
                    var audienceRows = BinaryCopyRows()
                    let read = try reader.forEachPerson(in: history.partitions[index]) { person, events in
                        try evaluate(
                            person: person, events: events, into: &rows, analysisRows: &analysisRows, audienceRows: &audienceRows,
                            spans: &spans, totals: &totals)
                    }
                    totals.events += read
                    progress.advance(by: read)
                    // On the worker's thread: while it waits for PostgreSQL, another evaluates.
                    try Self.copy(rows, with: OutcomeStore.copyStatement, on: session)
                    for (analysis, rows) in zip(analyses, analysisRows) { try Self.copy(rows, with: analysis.copyStatement, on: session) }
                    try Self.copy(audienceRows, with: AudienceSpanStore.copyStatement, on: session)
                }
                return totals
            }
        }
        return Running(history: history, tasks: tasks)
    }

    /// COPYs `rows` by `statement` (`COPY … FROM STDIN (FORMAT binary)`) on
    /// the run's session, whose lock keeps the workers' COPYs and the run's
    /// other statements from interleaving.
    private static func copy(_ rows: BinaryCopyRows, with statement: String, on session: Connection) throws {
        guard rows.rowCount > 0 else { return }
        _ = try session.copyIn(statement) { writer in try writer.write(rows) }
    }

    /// An evaluation under way.
    struct Running: Sendable {
        let history: SpilledHistory
        let tasks: [Pending<Totals>]

        /// Waits for every worker, removes the spill files, and adds up what the workers produced.
        func finish() throws -> Totals {
            let results = tasks.map { task in Result { try task.wait() } }
            history.remove()
            var totals = Totals()
            for result in results { totals.merge(try result.get()) }
            return totals
        }
    }

    private func evaluate(
        person: String, events: [FunnelEvent], into rows: inout BinaryCopyRows, analysisRows: inout [BinaryCopyRows],
        audienceRows: inout BinaryCopyRows, spans: inout AudienceSpans, totals: inout Totals
    ) throws {
        if let persons, !persons.contains(person) { return }
        // A group (`GroupMembership`) is evaluated by the funnels counting groups only, a person by the others.
        let aggregation: Funnel.Aggregation = HistoryUnit.isGroup(person) ? .group : .person
        if aggregation == .group { totals.groups += 1 } else { totals.persons += 1 }
        let audiences = self.audiences.filter { $0.aggregateBy == aggregation }
        // Every funnel's outcome first: an audience a funnel is broken down by may read another funnel's.
        var evaluated: [(index: Int, outcome: PersonOutcome, start: Int64)] = []
        var outcomes: [String: PersonOutcome] = [:]
        for (index, funnel) in funnels.enumerated() where funnel.aggregateBy == aggregation {
            // Distinct by messageId: the event_ids ledger stores each id once per app.
            let outcome = FunnelEvaluator.evaluate(distinctEvents: events, funnel: funnel, now: now)
            guard outcome.level > 0 || outcome.excluded, let start = outcome.startTime else { continue }
            evaluated.append((index, outcome, start))
            if !audiences.isEmpty { outcomes[funnel.name] = outcome }
        }
        let unit = AudienceSpans.Unit(outcomes: outcomes, events: events)
        for (index, evaluatedOutcome, start) in evaluated {
            let funnel = funnels[index]
            var outcome = evaluatedOutcome
            // Membership at the run's clock, from the person's own history (docs/audiences.md).
            outcome.setAudienceBreakdowns(of: funnel) { name in
                audiences.first { $0.name == name }.map { spans.holds($0.condition, unit: unit, at: now) } ?? false
            }
            let dayNumber = CohortCalendar.dayNumber(of: start, in: timeZones[index])
            let day = CohortCalendar.text(ofDay: dayNumber)
            if frozen.leavesOut(funnel: funnel.name, person: person, day: day) { continue }
            totals.affected.insert(FunnelDay(funnel: funnel.name, day: day))
            try OutcomeStore.append(outcome, funnel: funnel, person: person, day: dayNumber, to: &rows)
            totals.tallies[funnel.name, default: [:]][day, default: FunnelTally(funnel: funnel)]
                .add(outcome, shape: shapes[index], cohortDay: day, timeZone: timeZones[index])
            if !analyses.isEmpty {
                let evaluated = EvaluatedFunnel(person: person, funnel: funnel, outcome: outcome, cohortDay: dayNumber)
                let key = FunnelDay(funnel: funnel.name, day: day)
                for (analysis, i) in zip(analyses, analysisRows.indices) {
                    try analysis.append(
                        evaluated, events: events, to: &analysisRows[i], tally: &totals.analysisTallies[analysis.table, default: [:]][key])
                }
            }
        }
        if !audiences.isEmpty {
            AudienceSpanStore.append(person: person, audiences: audiences, unit: unit, now: now, spans: &spans, to: &audienceRows)
        }
    }
}
