import Foundation
import Funnels
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// `analytics.funnel_report`, the per-step report of a funnel given as JSON,
/// is a second implementation of the engine's ordered funnel: on random
/// definitions (track and screen steps, `where` on properties and context,
/// `any_of`, names given and generated, windows) over random histories, every
/// row equals the engine's report for the same text parsed as configuration.
@Suite("analytics.funnel_report against the engine")
struct FunnelReportSQLTests {
    static let names = ["a", "b", "c", "d"]
    static let second: Int64 = 1_000_000
    /// Three days ago, on the second: inside the log's partitions.
    static let base = (Timestamps.microseconds(Date()) / second - 3 * 86_400) * second

    /// A matcher as JSON: a track event or a screen, sometimes with a `where`.
    static func randomMatcher(_ rng: inout SplitMix) -> String {
        let kind = rng.next() % 3 == 0 ? "screen" : "event"
        var fields = [#""\#(kind)": "\#(names[Int(rng.next() % 4)])""#]
        switch rng.next() % 6 {
        case 0: fields.append(#""where": {"properties.x": "\#(rng.next() % 2)"}"#)
        case 1: fields.append(#""where": {"context.os.name": "\#(["iOS", "Android"][Int(rng.next() % 2)])", "properties.x": \#(rng.next() % 2)}"#)
        default: break
        }
        return "{" + fields.joined(separator: ", ") + "}"
    }

    static func randomDefinition(_ rng: inout SplitMix) -> String {
        let steps = (0..<(1 + Int(rng.next() % 5))).map { index -> String in
            var step = rng.next() % 5 == 0
                ? #"{"any_of": [\#(randomMatcher(&rng)), \#(randomMatcher(&rng))]}"#
                : randomMatcher(&rng)
            if rng.next() % 6 == 0 { step = String(step.dropLast()) + #", "name": "step \#(index)"}"# }
            return step
        }
        let window = ["2s", "4", "6s", "11s", "1m"][Int(rng.next() % 5)]
        return #"{"name": "random", "app": "x", "window": "\#(window)", "order": "ordered", "steps": [\#(steps.joined(separator: ", "))]}"#
    }

    static func randomHistory(_ rng: inout SplitMix, person: Int) -> [SeedEvent] {
        (0..<(1 + Int(rng.next() % 9))).map { index in
            let x = rng.next() % 4 == 0 ? "{}" : #"{"x": "\#(rng.next() % 2)"}"#
            let os = ["iOS", "Android"][Int(rng.next() % 2)]
            return SeedEvent(
                app: "x", type: rng.next() % 3 == 0 ? "screen" : "track", messageId: "\(person)-\(index)",
                event: names[Int(rng.next() % 4)], anonymousId: "p\(person)",
                timestamp: base + Int64(rng.next() % 12) * second, properties: x, context: #"{"os": {"name": "\#(os)"}}"#)
        }
    }

    static func funnelEvent(_ seed: SeedEvent) throws -> FunnelEvent {
        let properties = try JSONSerialization.jsonObject(with: Data(seed.properties.utf8)) as? [String: String] ?? [:]
        let context = try JSONSerialization.jsonObject(with: Data(seed.context.utf8)) as? [String: [String: String]] ?? [:]
        var attributes: [String: String] = [:]
        for (key, value) in properties { attributes["properties.\(key)"] = value }
        attributes["context.os.name"] = context["os"]?["name"]
        return FunnelEvent(
            messageId: seed.messageId, kind: seed.type == "screen" ? .screen : .track, name: seed.event,
            timestamp: seed.timestamp, attributes: attributes)
    }

    @Test("random definitions and histories: every row equals the engine's report", arguments: [UInt64(7), 8])
    func sameReports(seed: UInt64) async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        var rng = SplitMix(seed: seed)
        var histories: [[FunnelEvent]] = []
        var seeds: [SeedEvent] = []
        for person in 0..<300 {
            let history = Self.randomHistory(&rng, person: person)
            seeds += history
            histories.append(try history.map(Self.funnelEvent))
        }
        let batch = seeds
        try await pool.withConnection { try EventSeeder.insert($0, batch) }
        // Windows of up to a minute from events within 12 s: some still open at this clock.
        let asOf = Self.base + 8 * Self.second
        var compared = 0
        for _ in 0..<30 {
            let definition = Self.randomDefinition(&rng)
            let funnel = try FunnelConfiguration.parseFunnel(yaml: definition, source: "test")
            let outcomes = histories.map { FunnelEvaluator.evaluate(events: $0, funnel: funnel, now: asOf) }
            let expected = FunnelReport(funnel: funnel, outcomes: outcomes, now: asOf, timeZone: .gmt).steps.map { step in
                "\(step.index) \(step.name): \(step.persons) persons, \(step.dropOff) dropped, \(step.inProgress) in progress, "
                    + "\(Self.ratio(step.conversionFromPrevious)) of previous, \(Self.ratio(step.conversionFromStart)) of start"
            }
            let rows = try await pool.query(
                "SELECT * FROM analytics.funnel_report($1::jsonb, to_timestamp($2 / 1000000.0))",
                [.text(definition), .int(asOf)])
            let actual = try rows.rows.map { row in
                "\(try row.decode(Int.self, at: 0)) \(try row.decode(String.self, at: 1)): \(try row.decode(Int.self, at: 2)) persons, "
                    + "\(try row.decode(Int.self, at: 5)) dropped, \(try row.decode(Int.self, at: 6)) in progress, "
                    + "\(Self.ratio(try row.decode(Double?.self, at: 3))) of previous, \(Self.ratio(try row.decode(Double?.self, at: 4))) of start"
            }
            #expect(actual == expected, "\(definition)")
            compared += expected.count
        }
        #expect(compared > 50)
        await pool.close()
        try await db.drop()
    }

    @Test("random definitions and histories: every cell's persons equal the engine's, as many as funnel_report counts", arguments: [UInt64(9)])
    func samePersons(seed: UInt64) async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        var rng = SplitMix(seed: seed)
        var histories: [(String, [FunnelEvent])] = []
        var seeds: [SeedEvent] = []
        for person in 0..<200 {
            let history = Self.randomHistory(&rng, person: person)
            seeds += history
            histories.append(("p\(person)", try history.map(Self.funnelEvent)))
        }
        let batch = seeds
        try await pool.withConnection { try EventSeeder.insert($0, batch) }
        let asOf = Self.base + 8 * Self.second
        var compared = 0, listed = 0
        for _ in 0..<20 {
            let definition = Self.randomDefinition(&rng)
            let funnel = try FunnelConfiguration.parseFunnel(yaml: definition, source: "test")
            let outcomes = histories.map { ($0.0, FunnelEvaluator.evaluate(events: $0.1, funnel: funnel, now: asOf)) }
            let report = FunnelReport(funnel: funnel, outcomes: outcomes.map(\.1), now: asOf, timeZone: .gmt)
            for row in report.steps {
                for outcome in PersonCell.Outcome.allCases where outcome != .converted || row.index < funnel.steps.count {
                    let cell = PersonCell(outcome, step: row.index)
                    let expected = outcomes.filter { cell.contains($0.1, required: funnel.requiredStepIndices) }
                        .map { ListedPerson(id: $0.0, ids: [$0.0], cohortDay: CohortCalendar.day(of: $0.1.startTime ?? 0, in: .gmt), outcome: $0.1, in: funnel) }
                        .sorted(by: ListedPerson.listedBefore)
                        .map { "\($0.id) \($0.cohortDay) \($0.chainStart ?? -1) \($0.lastStep) \($0.lastStepName) \($0.lastStepTime ?? -1)" }
                    let rows = try await pool.withConnection { c in
                        try c.query("SET TIME ZONE 'UTC'")
                        return try c.query(
                            """
                            SELECT person_id, cohort_day::text, (extract(epoch FROM chain_start) * 1000000)::int8, last_step_index, last_step_name,
                                   (extract(epoch FROM last_step_time) * 1000000)::int8
                            FROM analytics.funnel_report_persons($1::jsonb, $2::integer, $3, to_timestamp($4 / 1000000.0))
                            """, [.text(definition), .int(Int64(row.index)), .text(outcome.rawValue), .int(asOf)]
                        ).rows.map { row in (0..<6).map { row.text(at: $0) ?? "" }.joined(separator: " ") }
                    }
                    #expect(rows == expected, "\(cell) \(definition)")
                    let number = switch outcome {
                    case .reached: row.persons
                    case .converted: report.steps[row.index].persons
                    case .dropped: row.dropOff
                    case .inProgress: row.inProgress
                    }
                    #expect(rows.count == number, "\(cell) \(definition)")
                    compared += 1
                    listed += rows.count
                }
            }
        }
        #expect(compared > 100 && listed > 500, "\(compared) cells, \(listed) persons")
        // What funnel_report refuses, this refuses alike, naming itself.
        let error = await #expect(throws: PostgresError.self) {
            try await pool.query(
                "SELECT * FROM analytics.funnel_report_persons($1::jsonb, 1, 'reached')", [.text(#"{"app": "x", "order": "strict", "steps": [{"event": "a"}]}"#)])
        }
        #expect(error?.message.contains("funnel_report_persons: order: not supported in SQL") == true, "\(String(describing: error))")
        for (step, outcome, message) in [(1, "left", "unknown outcome 'left'"), (3, "reached", "out of range"), (2, "converted", "last required step")] {
            let refused = await #expect(throws: PostgresError.self) {
                try await pool.query(
                    "SELECT * FROM analytics.funnel_report_persons($1::jsonb, $2::integer, $3)",
                    [.text(#"{"app": "x", "steps": [{"event": "a"}, {"event": "b"}]}"#), .int(Int64(step)), .text(outcome)])
            }
            #expect(refused?.message.contains(message) == true, "\(String(describing: refused))")
        }
        await pool.close()
        try await db.drop()
    }

    static func ratio(_ rate: Rate) -> String { ratio(rate.trials == 0 ? nil : Double(rate.successes) / Double(rate.trials)) }
    static func ratio(_ value: Double?) -> String { value.map { String(format: "%.9f", $0) } ?? "-" }

    @Test("the analyst calls it; what SQL cannot express, and bad definitions, are refused naming the field")
    func refusals() async throws {
        let session = try await AnalystSession.make()
        let rows = try await session.analyst.query(
            #"SELECT step_name, persons FROM analytics.funnel_report('{"app": "yoked", "steps": [{"event": "onboarding_started"}, {"event": "phone_entered"}]}')"#)
        #expect(rows.rows.count == 2)
        for (definition, message) in [
            (#"{"app": "yoked", "order": "strict", "steps": [{"event": "a"}]}"#, "funnel_report: order: not supported in SQL"),
            (#"{"app": "yoked", "steps": [{"event": "a", "within": "1h"}]}"#, "funnel_report: steps[0].within: not supported in SQL"),
            (#"{"app": "yoked", "steps": [{"event": "a", "where": {"plan": "pro"}}]}"#, "funnel_report: steps[0].where: 'plan' is not a path"),
            (#"{"app": "yoked", "window": "soon", "steps": [{"event": "a"}]}"#, "funnel_report: window: cannot parse 'soon'"),
            (#"{"app": "yoked", "window": "40000d", "steps": [{"event": "a"}]}"#, "funnel_report: window: cannot parse '40000d'"),
            (#"{"app": "yoked", "steps": [{"event": "a", "where": {"properties.a": "1", "properties.B": "2"}}, {"event": "a", "where": {"properties.a": "1"}}]}"#, ""),
            (#"{"app": "yoked", "steps": []}"#, "funnel_report: steps: missing"),
            (#"{"steps": [{"event": "a"}]}"#, "funnel_report: app: missing"),
            (#"{"app": "yoked", "steps": [{"any_of": [{"event": "a"}, {"page": "b"}]}]}"#, "funnel_report: steps[0].any_of[1]: expected an 'event' or a 'screen'"),
        ] {
            guard !message.isEmpty else {
                // Names from where values, in code-point order whatever the collation: B before a.
                let names = try await session.analyst.query(
                    "SELECT step_name FROM analytics.funnel_report($1::jsonb) ORDER BY step_index", [.text(definition)]).table
                #expect(names.map { $0["step_name"] ?? "" } == ["a (B=2, a=1)", "a (a=1)"], "\(names)")
                continue
            }
            let error = await #expect(throws: PostgresError.self) {
                try await session.analyst.query("SELECT * FROM analytics.funnel_report($1::jsonb)", [.text(definition)])
            }
            #expect(error?.message.contains(message) == true, "\(definition): \(String(describing: error))")
        }
        try await session.close()
    }
}
