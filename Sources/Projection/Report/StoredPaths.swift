import Foundation
public import Funnels
public import LibPQ

/// Where those who dropped at a step of a configured funnel went next, as of
/// the last nightly run (`onramp report --paths-after`): the persons
/// `analytics.funnel_step_persons` lists for the drop-off, each with their
/// events from the step to the end of their window (or the horizon) read
/// through `analytics.events`, counted by the same `PathsAnalysis` as at
/// query time. Reads; writes nothing.
public enum StoredPaths {
    /// The paths' counts (one whole path per person).
    public static func count(_ c: Connection, funnel: Funnel, paths: PathsAnalysis) throws -> PathCounts {
        let attributes = Array(funnel.referencedPaths).sorted()
        let horizon = paths.horizon.map { "\($0) microseconds" }
        var counts = PathCounts()
        var person: String?
        var outcome: PersonOutcome?
        var events: [FunnelEvent] = []
        func flush() {
            if let outcome, let path = paths.path(outcome, in: funnel, events: events) { counts.persons[path, default: 0] += 1 }
            events.removeAll(keepingCapacity: true)
        }
        // The persons first (the function keeps to the granted apps and leaves out erased persons), then their events.
        try c.forEachRow(
            """
            WITH dropped AS MATERIALIZED (
                SELECT s.person_id, s.chain_start, s.last_step_time
                FROM analytics.funnel_step_persons($1, $2::integer, 'dropped') AS s WHERE s.person_id IS NOT NULL
            )
            SELECT d.person_id, (extract(epoch FROM d.chain_start) * 1000000)::int8, (extract(epoch FROM d.last_step_time) * 1000000)::int8,
                   e.type, e.event, (extract(epoch FROM e."timestamp") * 1000000)::int8, e.message_id,
                   array_to_json(ARRAY(SELECT CASE split_part(p, '.', 1) WHEN 'properties' THEN e.properties WHEN 'context' THEN e.context
                                                                       ELSE e.traits END #>> string_to_array(substr(p, strpos(p, '.') + 1), '.')
                                       FROM unnest($4::text[]) AS p))::text
            FROM dropped d
            JOIN analytics.events e ON e.app = $3 AND e.person_id = d.person_id AND e."timestamp" >= d.last_step_time
                AND e."timestamp" <= coalesce(d.last_step_time + $5::interval, d.chain_start + $6::interval)
            ORDER BY d.person_id, e."timestamp", e.message_id
            """,
            [.text(funnel.name), .int(Int64(paths.step)), .text(funnel.app), .textArray(attributes), horizon.map(PostgresValue.text) ?? .null,
             .text("\(funnel.windowSeconds) seconds")]
        ) { row in
            let id = row.text(at: 0)
            if id != person {
                flush()
                person = id
                var times = [Int64?](repeating: nil, count: funnel.steps.count)
                let at = try row.decode(Int64?.self, at: 2)
                if times.indices.contains(paths.step - 1) { times[paths.step - 1] = at }
                let required = funnel.requiredStepIndices
                outcome = PersonOutcome(
                    level: (required.firstIndex(of: paths.step - 1) ?? 0) + 1, completed: false, inProgress: false, excluded: false,
                    startTime: try row.decode(Int64?.self, at: 1), chainStartTime: try row.decode(Int64?.self, at: 1), completionTime: nil,
                    stepTimes: times, optionalStepsDone: [], breakdown: [:])
            }
            let values = try JSONDecoder().decode([String?].self, from: Data((row.text(at: 7) ?? "[]").utf8))
            var found: [String: String] = [:]
            for (path, value) in zip(attributes, values) where value != nil { found[path] = value }
            events.append(FunnelEvent(
                messageId: row.text(at: 6) ?? "", kind: EventKind(rawValue: row.text(at: 3) ?? "") ?? .track, name: row.text(at: 4),
                timestamp: try row.decode(Int64.self, at: 5), attributes: found))
        }
        flush()
        return counts
    }
}
