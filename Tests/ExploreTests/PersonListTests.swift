import Explore
import Foundation
import Funnels
import LibPQ
import LocalPostgres
import LogReading
import Projection
import TestSupport
import Testing

/// The persons behind every number, on a real PostgreSQL: for random
/// definitions (every order, `within`, `hold`, exclusions, optional steps)
/// over a seeded log with identity merges, every cell's list at query time
/// is as long as the report's number, holds the persons the reference
/// (plain SQL and a brute force) puts there, and is the list the SQL
/// function reads from the nightly job's tables after a run at the same
/// clock, person for person; an erased person is in neither.
@Suite("persons behind every number: query time, the reference and the stored lists")
struct PersonListTests {
    @Test("random definitions: every cell's persons, at query time and from the night's tables")
    func everyCell() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("persons-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let events = QueryTimeTests.log(seed: 17, persons: 300)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        var rng = SplitMix(seed: 23)
        let explorer = Explorer(cacheRoot: cache)
        // Ten minutes after the last event: the windows of the latest starters are open.
        let now = (events.map(\.timestamp).max() ?? 0) + 600_000_000
        var seen: [String: Int] = [:]
        for index in 1...10 {
            let funnel = QueryTimeTests.randomFunnel(&rng, index: index)
            let context = Comment(rawValue: "definition \(index): \(funnel)")
            let cells = Self.cells(of: funnel)
            var query = FunnelQuery(funnel: funnel, timeZone: "UTC", now: now)
            let analyses = cells.map { PersonListAnalysis(cell: $0, funnel: funnel) }
            query.analyses = analyses
            let asked = query
            let answer = try await pool.withConnection { c in try explorer.answer(asked, on: c) }
            let lists = analyses.map { $0.persons(of: answer.days(of: $0)) }
            let report = answer.report
            let required = funnel.requiredStepIndices

            // Each list is the report's number, in the lists' order.
            for (cell, list) in zip(cells, lists) {
                let row = report.steps[cell.step - 1]
                let position = required.firstIndex(of: cell.step - 1) ?? 0
                let expected = switch cell.outcome {
                case .reached: row.persons
                case .converted: report.steps[required[position + 1]].persons
                case .dropped: row.dropOff
                case .inProgress: row.inProgress
                }
                #expect(list.count == expected, "\(cell) \(context)")
                #expect(list == list.sorted(by: ListedPerson.listedBefore), "\(cell) \(context)")
                #expect(Set(list.map(\.id)).count == list.count, "\(cell) \(context)")
                seen[cell.outcome.rawValue, default: 0] += list.count
            }

            // The reference's persons (exclusions aside, whose rule the property tests check).
            if funnel.exclusions.isEmpty {
                let histories = try await pool.withConnection { c in try QueryTimeTests.referenceHistories(c, funnel: funnel) }
                let levels = histories.mapValues { FunnelReference.bruteForce(events: $0, funnel: funnel).level }
                for (cell, list) in zip(cells, lists) {
                    guard let position = required.firstIndex(of: cell.step - 1) else { continue }
                    let ids = Set(list.map(\.id))
                    switch cell.outcome {
                    case .reached: #expect(ids == Set(levels.filter { $0.value > position }.keys), "\(cell) \(context)")
                    case .converted: #expect(ids == Set(levels.filter { $0.value > position + 1 }.keys), "\(cell) \(context)")
                    case .dropped, .inProgress:
                        let stopped = zip(cells, lists).filter { $0.0.step == cell.step && [.dropped, .inProgress].contains($0.0.outcome) }
                        let both = Set(stopped.flatMap { $0.1.map(\.id) })
                        #expect(both == Set(levels.filter { $0.value == position + 1 && position + 1 < required.count }.keys), "\(cell) \(context)")
                    }
                }
                seen["reference", default: 0] += 1
            }

            // The night's tables at the same clock, through the SQL function: the same persons, field for field.
            let configuration = FunnelConfiguration(reportTimeZone: "UTC", apps: [AppConfiguration(name: QueryTimeTests.app)], funnels: [funnel])
            let job = ProjectionJob(configuration: configuration, showProgress: false)
            let stored = try await pool.withConnection { c in
                _ = try job.run(c, mode: .rebuild, now: now)
                return try cells.map { cell in
                    var list: [ListedPerson] = []
                    try StoredPersons.forEach(c, funnel: funnel, cell: cell) { list.append($0) }
                    return list
                }
            }
            for (cell, (asked, kept)) in zip(cells, zip(lists, stored)) {
                #expect(asked == kept, "\(cell) \(context)")
            }

            // One breakdown value's cells: the report's per-step counts of the value, at query time and from the night.
            if let dimension = funnel.breakdowns.first, let value = report.breakdowns.first(where: { $0.dimension == dimension })?.values.first {
                let narrowedCells = cells.map { PersonCell($0.outcome, step: $0.step, breakdown: .init(path: dimension, value: value.value)) }
                var narrowed = FunnelQuery(funnel: funnel, timeZone: "UTC", now: now)
                let narrowedAnalyses = narrowedCells.map { PersonListAnalysis(cell: $0, funnel: funnel) }
                narrowed.analyses = narrowedAnalyses
                let question = narrowed
                let answered = try await pool.withConnection { c in try explorer.answer(question, on: c) }
                #expect(value.steps.count == funnel.steps.count, context)
                for (cell, analysis) in zip(narrowedCells, narrowedAnalyses) {
                    let list = analysis.persons(of: answered.days(of: analysis))
                    let counts = value.steps[cell.step - 1]
                    let position = required.firstIndex(of: cell.step - 1) ?? 0
                    let expected = switch cell.outcome {
                    case .reached: counts.persons
                    case .converted: value.steps[required[position + 1]].persons
                    case .dropped: counts.dropOff
                    case .inProgress: counts.inProgress
                    }
                    #expect(list.count == expected, "\(cell) \(context)")
                    if cell.step == 1 && cell.outcome == .reached { #expect(list.count == value.started, context) }
                    let kept = try await pool.withConnection { c in
                        var kept: [ListedPerson] = []
                        try StoredPersons.forEach(c, funnel: funnel, cell: cell) { kept.append($0) }
                        return kept
                    }
                    #expect(list == kept, "\(cell) \(context)")
                }
                seen["breakdown value", default: 0] += 1
            }
        }
        #expect(seen["reference", default: 0] >= 4, "\(seen)")
        for outcome in PersonCell.Outcome.allCases { #expect(seen[outcome.rawValue, default: 0] > 0, "\(seen)") }
        await pool.close()
        try await db.drop()
    }

    @Test("random definitions: the paths after each step equal a brute force's, level 1 is what they did instead")
    func pathsAfterEveryStep() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("paths-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let events = QueryTimeTests.log(seed: 41, persons: 300)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        var rng = SplitMix(seed: 43)
        let explorer = Explorer(cacheRoot: cache)
        let now = (events.map(\.timestamp).max() ?? 0) + 600_000_000
        var seen: [String: Int] = [:]
        for index in 1...12 {
            var random = QueryTimeTests.randomFunnel(&rng, index: index)
            random.exclusions = []
            let funnel = random
            let context = Comment(rawValue: "definition \(index): \(funnel)")
            let required = funnel.requiredStepIndices
            let horizon: Int64? = index % 3 == 0 ? 600_000_000 : nil
            let steps = required.dropLast().map { $0 + 1 }
            var query = FunnelQuery(funnel: funnel, timeZone: "UTC", now: now)
            let paths = steps.map { PathsAnalysis(step: $0, horizon: horizon, funnel: funnel) }
            let lists = steps.map { PersonListAnalysis(cell: PersonCell(.dropped, step: $0), funnel: funnel) }
            query.analyses = paths + lists
            query.diagnostics = true
            let asked = query
            let answer = try await pool.withConnection { c in try explorer.answer(asked, on: c) }
            let histories = try await pool.withConnection { c in try QueryTimeTests.referenceHistories(c, funnel: funnel) }
            for (position, (analysis, list)) in zip(paths, lists).enumerated() {
                let counted = PathCounts(adding: answer.days(of: analysis).values)
                let dropped = list.persons(of: answer.days(of: list)).map(\.id)
                var reference = PathCounts()
                for person in dropped {
                    let path = Self.referencePath(histories[person] ?? [], funnel: funnel, position: position, horizon: horizon)
                    reference.persons[path, default: 0] += 1
                }
                #expect(counted == reference, "step \(analysis.step) \(context)")
                let tree = analysis.tree(counted)
                #expect(tree.persons == dropped.count && tree.persons == answer.report.steps[analysis.step - 1].dropOff, context)
                #expect(tree.children.count <= PathsAnalysis.branches + 1, context)
                // Level 1 is "what they did instead", at the default horizon (the log's funnels ignore nothing but heartbeats).
                if horizon == nil, funnel.ignore.isEmpty, let diagnosed = answer.report.diagnostics?.steps.first(where: { $0.index == analysis.step }) {
                    var level1: [String: Int] = [:]
                    for (path, persons) in counted.persons { level1[path[0], default: 0] += persons }
                    #expect(Dictionary(uniqueKeysWithValues: diagnosed.nextEvents.map { ($0.label, $0.persons) }) == level1, "step \(analysis.step) \(context)")
                    seen["level 1", default: 0] += 1
                }
                if counted.persons.keys.contains(where: { $0.count == PathsAnalysis.depth && $0.last != DropOffFacts.noFurtherEvents }) {
                    seen["three levels", default: 0] += 1
                }
                seen["dropped", default: 0] += dropped.count
            }
        }
        #expect(seen["level 1", default: 0] >= 5 && seen["three levels", default: 0] >= 3 && seen["dropped", default: 0] > 100, "\(seen)")
        await pool.close()
        try await db.drop()
    }

    /// A dropped person's path by docs/funnels.md, "Where they went": their
    /// chain's times by the brute force, then their events after the step
    /// (strictly later, to the window's end or the horizon, ignored events
    /// skipped, one instant in label order), each level the first whose
    /// label differs from the one before, the step's own event's first.
    static func referencePath(_ history: [FunnelEvent], funnel: Funnel, position: Int, horizon: Int64?) -> [String] {
        let events = FunnelReference.distinct(history)
        let reference = FunnelReference.bruteForce(events: events, funnel: funnel)
        guard reference.level == position + 1 else { return ["(not dropped here by the reference)"] }
        let best = reference.firstReach[position]
        let at = best.end
        let end = horizon.map { at + $0 } ?? best.start + funnel.windowMicroseconds
        let required = funnel.requiredStepIndices
        let isStep: (FunnelEvent) -> Bool = { event in
            funnel.order == .any ? required.contains { funnel.steps[$0].matches(event) } : funnel.steps[required[position]].matches(event)
        }
        var previous = events.filter { $0.timestamp == at && isStep($0) }.map(\.label).min()
        var path: [String] = []
        let later = events.filter { event in event.timestamp > at && event.timestamp <= end && !funnel.ignore.contains { $0.matches(event) } }
            .sorted { ($0.timestamp, $0.label) < ($1.timestamp, $1.label) }
        for event in later where event.label != previous && path.count < 3 {
            path.append(event.label)
            previous = event.label
        }
        return path.count == 3 ? path : path + ["(no further events)"]
    }

    @Test("a funnel counting groups lists groups: every cell at query time is the night's and the reference's; with their members")
    func groups() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("persons-groups-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        try await pool.withConnection { c in try EventSeeder.insert(c, CompanyLog.events(seed: 6)) }
        let funnel = CompanyLog.funnel
        var configured = try FunnelConfiguration.default()
        configured.funnels.append(funnel)
        let job = ProjectionJob(configuration: configured, showProgress: false)
        let now = Timestamps.microseconds(Date())
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: now) }
        let cells = Self.cells(of: funnel)
        var query = FunnelQuery(funnel: funnel, timeZone: "UTC", now: now)
        let analyses = cells.map { PersonListAnalysis(cell: $0, funnel: funnel) }
        query.analyses = analyses
        let asked = query
        let answer = try await pool.withConnection { c in try Explorer(cacheRoot: cache).answer(asked, on: c) }
        let levels = try await pool.withConnection { c in try CompanyLog.referenceLevels(c) }
        for (cell, analysis) in zip(cells, analyses) {
            let list = analysis.persons(of: answer.days(of: analysis))
            #expect(list.allSatisfy { $0.ids == [$0.id] }, "a group's ids are its own")
            let kept = try await pool.withConnection { c in
                var kept: [ListedPerson] = []
                try StoredPersons.forEach(c, funnel: funnel, cell: cell) { kept.append($0) }
                return kept
            }
            #expect(list == kept, "\(cell)")
            if cell.outcome == .reached {
                #expect(Set(list.map(\.id)) == Set(levels.filter { $0.value >= cell.step }.keys), "\(cell)")
            }
        }
        // Their name and members: who sent group calls naming them.
        let reached = try #require(analyses.first).persons(of: answer.days(of: try #require(analyses.first)))
        let traits = try await pool.withConnection { c in
            try PersonTraits.read(c, app: "ops", persons: reached, paths: ["name", PersonTraits.members], groups: true)
        }
        let members = try await pool.query("SELECT group_id, string_agg(person_id, ' ' ORDER BY person_id COLLATE \"C\") FROM analytics.group_members WHERE app = 'ops' GROUP BY 1").rows
        let expected = Dictionary(uniqueKeysWithValues: members.compactMap { row in row.text(at: 0).map { ($0, row.text(at: 1) ?? "") } })
        #expect(!reached.isEmpty && reached.allSatisfy { traits[$0.id]?[PersonTraits.members] == expected[$0.id] }, "\(traits)")
        await pool.close()
        try await db.drop()
    }

    /// Every cell a funnel's report has: each outcome of each required
    /// step (converted but at the last), `reached` of each optional one.
    static func cells(of funnel: Funnel) -> [PersonCell] {
        let required = funnel.requiredStepIndices
        return funnel.steps.indices.flatMap { index -> [PersonCell] in
            guard !funnel.steps[index].isOptional else { return [PersonCell(.reached, step: index + 1)] }
            return PersonCell.Outcome.allCases.filter { $0 != .converted || index != required.last }.map { PersonCell($0, step: index + 1) }
        }
    }

    @Test("an erased person is in no list, at query time or from the stored tables, once the erasure commits")
    func erasedPersons() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("persons-erase-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        try await pool.withConnection { c in try EventSeeder.insert(c, QueryTimeTests.log(seed: 31, persons: 120)) }
        let funnel = Funnel(
            name: "erasing", app: QueryTimeTests.app, windowSeconds: 86_400, steps: [FunnelStep(.event("a")), FunnelStep(.event("b"))],
            breakdowns: ["context.os.name"])
        let configuration = FunnelConfiguration(reportTimeZone: "UTC", apps: [AppConfiguration(name: QueryTimeTests.app)], funnels: [funnel])
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        let now = Timestamps.microseconds(Date())
        let cell = PersonCell(.reached, step: 1)
        let analysis = PersonListAnalysis(cell: cell, funnel: funnel)
        var query = FunnelQuery(funnel: funnel, timeZone: "UTC", now: now)
        query.analyses = [analysis]
        let asked = query
        let explorer = Explorer(cacheRoot: cache)
        func lists() async throws -> (asked: [ListedPerson], stored: [ListedPerson]) {
            try await pool.withConnection { c in
                let asked = analysis.persons(of: try explorer.answer(asked, on: c).days(of: analysis))
                var stored: [ListedPerson] = []
                try StoredPersons.forEach(c, funnel: funnel, cell: cell) { stored.append($0) }
                return (asked, stored)
            }
        }
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: now) }
        let before = try await lists()
        #expect(before.asked == before.stored && !before.asked.isEmpty)
        // A person known by a user id and a device: erased by their user id, without the run that follows.
        let person = try #require(before.asked.first { $0.ids.count > 1 && $0.id.hasPrefix("u") })
        _ = try await pool.withConnection { c in
            try c.query("SELECT * FROM onramp_privacy_erase($1, ARRAY[$2], ARRAY[]::text[], 'test', false)", [.text(QueryTimeTests.app), .text(person.id)])
        }
        let after = try await lists()
        #expect(!after.asked.contains { $0.id == person.id || $0.ids.contains(person.id) })
        #expect(after.stored == before.stored.filter { $0.id != person.id })
        await pool.close()
        try await db.drop()
    }
}
