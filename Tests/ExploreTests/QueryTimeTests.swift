import Explore
import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection
import TestSupport
import Testing

/// A funnel asked at query time against the same funnel configured for the
/// nightly job, on a real PostgreSQL: for random definitions (every option,
/// filters, breakdowns) over a seeded log with identity merges, ties and
/// late events, the reports are equal, and both agree with the reference:
/// persons and their events read back with plain SQL, identities linked in
/// SQL, and each person's level found by brute force.
@Suite("query-time funnels against the nightly job, on a real PostgreSQL")
struct QueryTimeTests {
    static let app = "x"
    static let names = ["a", "b", "c", "d"]

    /// Persons' histories for app x: anonymous at first, some identified
    /// later (an identify carries both ids), a few anonymous ids seen with
    /// two users (the earliest wins; at one time, the smaller id), events at
    /// the same second, screens and pages among the tracks.
    static func log(seed: UInt64, persons: Int) -> [SeedEvent] {
        var rng = SplitMix(seed: seed)
        let day: Int64 = 86_400_000_000
        let base = (Timestamps.microseconds(Date()) / day - 6) * day
        var events: [SeedEvent] = []
        for p in 0..<persons {
            let anonymous = "a\(p)"
            let user: String? = rng.next() % 2 == 0 ? "u\(p % (persons / 2))" : nil
            var t = base + Int64(rng.next() % 5) * day + Int64(rng.next() % 86_400) * 1_000_000
            let count = 3 + Int(rng.next() % 10)
            var identified = false, serverSide = false
            for n in 0..<count {
                t += Int64(rng.next() % 4) * Int64([1, 10, 120, 1_800][Int(rng.next() % 4)]) * 1_000_000
                if let user, !identified, rng.next() % 3 == 0 {
                    identified = true
                    if p % 4 == 1 {
                        // Signed in as a server-side library says it: an alias, then the user id alone.
                        events.append(SeedEvent(app: app, type: "alias", messageId: "\(p)-\(n)-alias", userId: user, timestamp: t, previousId: anonymous))
                        serverSide = true
                        continue
                    }
                    events.append(SeedEvent(app: app, type: "identify", messageId: "\(p)-\(n)-id", anonymousId: anonymous, userId: user, timestamp: t))
                    if rng.next() % 6 == 0 {  // the same device, another account, at the same time or later
                        events.append(SeedEvent(
                            app: app, type: "identify", messageId: "\(p)-\(n)-id2", anonymousId: anonymous,
                            userId: "u\(Int(rng.next() % UInt64(persons)))", timestamp: t + Int64(rng.next() % 2) * 1_000_000))
                    }
                }
                var properties: [String: String] = [:]
                if rng.next() % 4 != 0 { properties["x"] = String(rng.next() % 2) }
                if rng.next() % 3 != 0 { properties["y"] = String(rng.next() % 3) }
                let pick = rng.next() % 12
                let (type, name): (String, String?) =
                    pick == 0 ? ("page", "home") : pick == 1 ? ("screen", names[Int(rng.next() % 2)])
                    : pick == 2 ? ("track", ["e", "hb"][Int(rng.next() % 2)]) : ("track", names[Int(rng.next() % 4)])
                events.append(SeedEvent(
                    app: app, type: type, messageId: "\(p)-\(n)", event: name, anonymousId: serverSide ? nil : anonymous,
                    userId: identified ? user : nil, timestamp: t, properties: EventSeeder.json(properties),
                    context: p % 3 == 0 ? #"{"os": {"name": "Android"}}"# : #"{"os": {"name": "iOS"}}"#))
            }
            if let user, identified, p % 9 == 2 {
                // Renamed after their last event (and, for some, back again: a loop of aliases).
                t += 30_000_000
                events.append(SeedEvent(app: app, type: "alias", messageId: "\(p)-rename", userId: user + "r", timestamp: t, previousId: user))
                events.append(SeedEvent(app: app, messageId: "\(p)-renamed", event: names[Int(rng.next() % 4)], userId: user + "r", timestamp: t + 1_000_000))
                if p % 18 == 2 {
                    events.append(SeedEvent(app: app, type: "alias", messageId: "\(p)-back", userId: user, timestamp: t + 2_000_000, previousId: user + "r"))
                }
            }
        }
        return events
    }

    static func randomMatcher(_ rng: inout SplitMix) -> EventMatcher {
        let conditions: [String: String] = rng.next() % 5 == 0 ? ["properties.x": String(rng.next() % 2)] : [:]
        let name = names[Int(rng.next() % 4)]
        return rng.next() % 8 == 0 && ["a", "b"].contains(name) ? .screen(name, where: conditions) : .event(name, where: conditions)
    }

    static func randomFunnel(_ rng: inout SplitMix, index: Int) -> Funnel {
        let order = Funnel.Order.allCases[Int(rng.next() % 3)]
        let requiredCount = 2 + Int(rng.next() % 3)
        var steps: [FunnelStep] = []
        for position in 0..<requiredCount {
            if order != .any && position > 0 && rng.next() % 6 == 0 { steps.append(FunnelStep(randomMatcher(&rng), isOptional: true)) }
            var step = FunnelStep(matchers: rng.next() % 5 == 0 ? [randomMatcher(&rng), randomMatcher(&rng)] : [randomMatcher(&rng)])
            if order != .any && position > 0 && rng.next() % 3 == 0 { step.within = [10, 120, 1_800][Int(rng.next() % 3)] }
            steps.append(step)
        }
        var funnel = Funnel(
            name: "random_\(index)", app: app, windowSeconds: [60, 600, 3_600, 86_400][Int(rng.next() % 4)], steps: steps,
            breakdowns: [["properties.y", "context.os.name"], ["context.os.name"], ["context.app.version"]][Int(rng.next() % 3)])
        funnel.order = order
        if rng.next() % 4 == 0 { funnel.hold = ["properties.x"] }
        if order == .strict && rng.next() % 2 == 0 { funnel.ignore = [.event("hb")] }
        if rng.next() % 3 == 0 {
            var exclusion = Exclusion(.event(["e", "hb"][Int(rng.next() % 2)]))
            let required = funnel.requiredStepIndices
            if order != .any && rng.next() % 2 == 0 { exclusion.between = required[0]...required[1] }
            funnel.exclusions = [exclusion]
        }
        if rng.next() % 3 == 0 { funnel.attribution = .lastStep }
        return funnel
    }

    @Test("random definitions: query time equals the nightly job at the same clock, and the reference")
    func randomDefinitions() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("explore-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let events = Self.log(seed: 5, persons: 400)
        // Most of the log first; the rest arrives after the store was built, some of it late (earlier times).
        let cut = events.count * 4 / 5
        try await pool.withConnection { c in try EventSeeder.insert(c, Array(events[..<cut])) }
        var rng = SplitMix(seed: 9)
        let explorer = Explorer(cacheRoot: cache)
        let now = Timestamps.microseconds(Date())
        let firstQuery = FunnelQuery(funnel: Self.randomFunnel(&rng, index: 0), timeZone: "UTC", now: now)
        let first = try await pool.withConnection { c in try explorer.answer(firstQuery, on: c, keeping: ["properties.x", "properties.y"]) }
        #expect(first.storeRebuilt && first.events == cut)
        try await pool.withConnection { c in try EventSeeder.insert(c, Array(events[cut...])) }

        var seen: [String: Int] = [:]
        for index in 1...24 {
            let funnel = Self.randomFunnel(&rng, index: index)
            let zone = ["UTC", "America/Los_Angeles", "Asia/Tokyo"][index % 3]
            var query = FunnelQuery(funnel: funnel, timeZone: zone, now: now)
            // Diagnostics and retention hand the engine every event; without them, those a step names.
            query.diagnostics = index % 3 == 0
            query.retention = index % 4 == 0
            if index % 5 == 0 {
                let days = Set(events.map { CohortCalendar.day(of: $0.timestamp, in: TimeZone(identifier: zone) ?? .gmt) }).sorted()
                query.from = days[1]
                query.to = days[days.count - 2]
            }
            let asked = query
            let answer = try await pool.withConnection { c in try explorer.answer(asked, on: c) }
            #expect(!answer.storeRebuilt, "the store is kept, not read again")
            #expect(answer.events == events.count)

            let configuration = FunnelConfiguration(reportTimeZone: zone, apps: [AppConfiguration(name: Self.app)], funnels: [funnel])
            let job = ProjectionJob(configuration: configuration, showProgress: false)
            let nightly = try await pool.withConnection { c in
                _ = try job.run(c, mode: .rebuild, now: now)
                return try ReportQuery(from: asked.from, to: asked.to).results(c, configuration: configuration, now: now)
            }
            var expected = try #require(nightly.first).report
            if !query.retention { expected.retention = nil }
            if !query.diagnostics { expected.diagnostics = nil }
            if !query.diagnostics && !query.retention { seen["the events a step names", default: 0] += 1 }
            let context = Comment(rawValue: "definition \(index): \(funnel)")
            #expect(answer.report == expected, context)
            #expect(answer.secondsToComplete.sorted() == nightly.first?.secondsToComplete.sorted(), context)
            #expect(answer.report.started > 0, context)

            // The reference, for definitions without exclusions (whose rule the property tests check).
            if funnel.exclusions.isEmpty, query.from == nil {
                let levels = try await pool.withConnection { c in try Self.referenceLevels(c, funnel: funnel) }
                let required = funnel.requiredStepIndices
                #expect(answer.report.started == levels.filter { $0 >= 1 }.count, context)
                for (position, step) in required.enumerated() {
                    #expect(answer.report.steps[step].persons == levels.filter { $0 > position }.count, context)
                }
                seen["reference", default: 0] += 1
            }
            seen["\(funnel.order)", default: 0] += 1
            if !funnel.hold.isEmpty { seen["hold", default: 0] += 1 }
            if answer.report.completed > 0 { seen["completed", default: 0] += 1 }
        }
        #expect(seen["reference", default: 0] >= 8 && seen["strict", default: 0] >= 3 && seen["any", default: 0] >= 3, "\(seen)")
        #expect(seen["the events a step names", default: 0] >= 8, "\(seen)")
        await pool.close()
        try await db.drop()
    }

    @Test("a store brought up to date many times (its segments merged), or found damaged, answers as one read whole")
    func storeKeptAndRepaired() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("explore-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let events = Self.log(seed: 21, persons: 200)
        var rng = SplitMix(seed: 4)
        let funnel = Self.randomFunnel(&rng, index: 0)
        let now = Timestamps.microseconds(Date())
        let query = FunnelQuery(funnel: funnel, timeZone: "UTC", now: now)
        let kept = Explorer(cacheRoot: cache)
        // Twelve deliveries, a query after each: more segments than the store keeps.
        let batches = 12
        var answers: [FunnelAnswer] = []
        for batch in 0..<batches {
            let part = Array(events[events.count * batch / batches..<events.count * (batch + 1) / batches])
            try await pool.withConnection { c in try EventSeeder.insert(c, part) }
            answers.append(try await pool.withConnection { c in try kept.answer(query, on: c) })
        }
        #expect(answers.map(\.newEvents).reduce(0, +) == events.count)
        #expect(answers.filter(\.storeRebuilt).count == 1)
        let segments = try FileManager.default.subpathsOfDirectory(atPath: cache.path).filter { $0.hasSuffix("time.i64") }
        #expect(segments.count <= 8, "\(segments)")
        let fresh = try await pool.withConnection { c in try Explorer(cacheRoot: cache.appendingPathComponent("fresh")).answer(query, on: c) }
        #expect(fresh.storeRebuilt)
        #expect(answers.last?.report == fresh.report)

        // A column cut short: the store is read from the log again, and answers the same.
        let column = try #require(segments.first.map { cache.appendingPathComponent($0) })
        let handle = try FileHandle(forWritingTo: column)
        try handle.truncate(atOffset: 8)
        try handle.close()
        // (Counted afresh: the answer kept from before would need no column.)
        let recounting = Explorer(cacheRoot: cache, reuseAnswers: false)
        let repaired = try await pool.withConnection { c in try recounting.answer(query, on: c) }
        #expect(repaired.storeRebuilt)
        #expect(repaired.report == fresh.report)

        // A name number no table holds: found when the columns are read, and the store read again.
        let names = try #require(try FileManager.default.subpathsOfDirectory(atPath: cache.path)
            .first { $0.hasSuffix("name.u32") && !$0.hasPrefix("fresh") }.map { cache.appendingPathComponent($0) })
        let writer = try FileHandle(forWritingTo: names)
        try writer.write(contentsOf: Data([0xFF, 0xFF, 0xFF, 0x7F]))
        try writer.close()
        let renumbered = try await pool.withConnection { c in try recounting.answer(query, on: c) }
        #expect(renumbered.storeRebuilt)
        #expect(renumbered.report == fresh.report)
        await pool.close()
        try await db.drop()
    }

    @Test("an answer is reused only while exact: the same events, and no window closed since it was counted")
    func answersReusedWhileExact() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("explore-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let now = Timestamps.microseconds(Date())
        let minute: Int64 = 60_000_000
        var events = Self.log(seed: 8, persons: 120)
        // Two persons whose windows are open at `now`: one closes in 20 minutes, one in 40.
        for (person, ago) in [("late1", 40), ("late2", 20)] {
            events.append(SeedEvent(app: Self.app, messageId: "\(person)-a", event: "a", anonymousId: person, timestamp: now - Int64(ago) * minute))
        }
        let seeded = events
        try await pool.withConnection { c in try EventSeeder.insert(c, seeded) }
        let funnel = Funnel(name: "ab", app: Self.app, windowSeconds: 3_600, steps: [FunnelStep(.event("a")), FunnelStep(.event("b"))])
        let explorer = Explorer(cacheRoot: cache)
        func ask(at clock: Int64) async throws -> FunnelAnswer {
            try await pool.withConnection { c in try explorer.answer(FunnelQuery(funnel: funnel, timeZone: "UTC", now: clock), on: c) }
        }
        func nightly(at clock: Int64) async throws -> FunnelReport? {
            let configuration = FunnelConfiguration(apps: [AppConfiguration(name: Self.app)], funnels: [funnel])
            var report = try await pool.withConnection { c in
                _ = try ProjectionJob(configuration: configuration, showProgress: false).run(c, mode: .rebuild, now: clock)
                return try ReportQuery().results(c, configuration: configuration, now: clock).first?.report
            }
            // Asked without --diagnostics or --retention.
            report?.diagnostics = nil
            report?.retention = nil
            return report
        }
        let first = try await ask(at: now)
        #expect(!first.reusedAnswer && first.report.inProgress >= 2)
        let nightFirst = try await nightly(at: now)
        #expect(first.report == nightFirst)
        let again = try await ask(at: now + 5 * minute)
        #expect(again.reusedAnswer, "no window closed in those five minutes")
        let nightAgain = try await nightly(at: now + 5 * minute)
        #expect(again.report == nightAgain)
        let later = try await ask(at: now + 25 * minute)
        #expect(!later.reusedAnswer, "a window closed at +20 minutes")
        #expect(later.report.inProgress == first.report.inProgress - 1)
        let nightLater = try await nightly(at: now + 25 * minute)
        #expect(later.report == nightLater)
        let earlier = try await ask(at: now - minute)
        #expect(!earlier.reusedAnswer, "an answer counted later is not reused for an earlier clock")
        try await pool.withConnection { c in
            try EventSeeder.insert(c, [SeedEvent(app: Self.app, messageId: "late2-b", event: "b", anonymousId: "late2", timestamp: now - 10 * minute)])
        }
        let afterEvent = try await ask(at: now + 25 * minute)
        #expect(!afterEvent.reusedAnswer && afterEvent.newEvents == 1)
        #expect(afterEvent.report.completed == later.report.completed + 1)
        let nightAfter = try await nightly(at: now + 25 * minute)
        #expect(afterEvent.report == nightAfter)
        await pool.close()
        try await db.drop()
    }

    /// Each person's level by brute force, from the log read with plain SQL:
    /// each id (anonymous, or an alias's previous id) is linked to the user
    /// first seen with it (the smaller at one time); an event's id (its user
    /// id, else its anonymous id) is followed link by link to its end, and
    /// in a loop the member whose link was seen last is the person.
    static func referenceLevels(_ c: Connection, funnel: Funnel) throws -> [Int] {
        try referenceHistories(c, funnel: funnel).values.map { FunnelReference.bruteForce(events: $0, funnel: funnel).level }
    }

    /// Each person's events (by the person's id), read and linked in plain SQL as `referenceLevels` says.
    static func referenceHistories(_ c: Connection, funnel: Funnel) throws -> [String: [FunnelEvent]] {
        var persons: [String: [FunnelEvent]] = [:]
        let paths = Array(funnel.referencedPaths).sorted()
        try c.forEachRow(
            """
            WITH RECURSIVE sightings AS (
                SELECT anonymous_id AS id, user_id, "timestamp" FROM events
                WHERE app = $1 AND anonymous_id IS NOT NULL AND user_id IS NOT NULL
                UNION ALL
                SELECT previous_id, user_id, "timestamp" FROM events
                WHERE app = $1 AND previous_id IS NOT NULL AND user_id IS NOT NULL
            ), links AS (
                SELECT DISTINCT ON (id) id, user_id, "timestamp" FROM sightings ORDER BY id, "timestamp", user_id COLLATE "C"
            ), walk (start, path) AS (
                SELECT id, ARRAY[id] FROM links
                UNION ALL
                SELECT w.start, w.path || l.user_id FROM walk w JOIN links l ON l.id = w.path[cardinality(w.path)]
                WHERE l.user_id <> l.id AND NOT (w.path[cardinality(w.path)] = ANY (w.path[1:cardinality(w.path) - 1]))
            ), ends AS (
                SELECT DISTINCT ON (start) start, path, path[cardinality(path)] AS last FROM walk ORDER BY start, cardinality(path) DESC
            ), persons AS (
                SELECT e.start AS id,
                       CASE WHEN e.last = ANY (e.path[1:cardinality(e.path) - 1]) THEN (
                           SELECT m.id FROM unnest(e.path[array_position(e.path, e.last):cardinality(e.path) - 1]) AS m(id)
                           JOIN links l ON l.id = m.id ORDER BY l."timestamp" DESC, l.user_id COLLATE "C" DESC LIMIT 1)
                       ELSE e.last END AS person
                FROM ends e
            )
            SELECT coalesce(p.person, e.user_id, e.anonymous_id), e.message_id, e.type, e.event,
                   (extract(epoch FROM e."timestamp") * 1000000)::int8, e.properties::text, e.context::text
            FROM events e LEFT JOIN persons p ON p.id = coalesce(e.user_id, e.anonymous_id)
            WHERE e.app = $1
            """, [.text(funnel.app)]
        ) { row in
            let properties = try JSONSerialization.jsonObject(with: Data(try row.decode(String.self, at: 5).utf8)) as? [String: Any] ?? [:]
            let context = try JSONSerialization.jsonObject(with: Data(try row.decode(String.self, at: 6).utf8)) as? [String: Any] ?? [:]
            var attributes: [String: String] = [:]
            for path in paths {
                let parts = path.split(separator: ".").map(String.init)
                var node: Any? = parts[0] == "properties" ? properties : parts[0] == "context" ? context : nil
                for part in parts.dropFirst() { node = (node as? [String: Any])?[part] }
                if let value = node as? String { attributes[path] = value }
            }
            let event = FunnelEvent(
                messageId: try row.decode(String.self, at: 1), kind: EventKind(rawValue: try row.decode(String.self, at: 2)) ?? .track,
                name: try row.decode(String?.self, at: 3), timestamp: try row.decode(Int64.self, at: 4), attributes: attributes)
            persons[try row.decode(String.self, at: 0), default: []].append(event)
        }
        return persons
    }
}
