import Foundation
import Funnels
import LibPQ
import LocalPostgres
import NIOConcurrencyHelpers
import Projection
import TestSupport
import Testing

/// A configuration edited between two nightly runs: the run after the edit
/// recomputes the changed funnels from the whole log (those only), removes
/// the rows of a funnel no longer configured, and leaves tables equal, row
/// for row, to a rebuild with the new configuration.
@Suite("a changed funnel definition against a real PostgreSQL")
struct DefinitionChangeTests {
    /// One kind of edit, the funnels it must recompute and remove, and a word its reason must hold.
    struct Edit: Sendable, CustomTestStringConvertible {
        let name: String
        let recomputes: [String]
        var removes: [String] = []
        var reason: String = ""
        let apply: @Sendable (inout FunnelConfiguration) -> Void

        var testDescription: String { name }
    }

    static func editing(_ name: String, in c: inout FunnelConfiguration, _ body: (inout Funnel) -> Void) {
        guard let index = c.funnels.firstIndex(where: { $0.name == name }) else { return }
        body(&c.funnels[index])
    }

    static let edits: [Edit] = [
        Edit(name: "a step removed", recomputes: ["yoked_onboarding"], reason: "steps 12 → 11") { c in
            editing("yoked_onboarding", in: &c) { $0.steps.remove(at: 2) }
        },
        Edit(name: "a where added to a step", recomputes: ["ops_employee"], reason: "properties.auth_method = email") { c in
            editing("ops_employee", in: &c) { $0.steps[1].matchers[0].conditions["properties.auth_method"] = "email" }
        },
        Edit(name: "an exclusion added", recomputes: ["yoked_onboarding"], reason: "exclusion added: event help_opened") { c in
            editing("yoked_onboarding", in: &c) { $0.exclusions.append(.event("help_opened")) }
        },
        Edit(name: "a step made optional", recomputes: ["forma_onboarding"], reason: "optional") { c in
            editing("forma_onboarding", in: &c) { $0.steps[2].isOptional = true }
        },
        Edit(name: "the window cut", recomputes: ["yoked_onboarding"], reason: "window 24h → 1h") { c in
            editing("yoked_onboarding", in: &c) { $0.windowSeconds = 3_600 }
        },
        Edit(name: "a breakdown added", recomputes: ["umuve_onboarding"], reason: "breakdown added: properties.auth_method") { c in
            editing("umuve_onboarding", in: &c) { $0.breakdowns.append("properties.auth_method") }
        },
        Edit(name: "a funnel added", recomputes: ["yoked_otp"], reason: "new funnel") { c in
            c.funnels.append(Funnel(name: "yoked_otp", app: "yoked", steps: [
                FunnelStep(.event("phone_entered")), FunnelStep(.event("otp_verified")),
            ]))
        },
        Edit(name: "a funnel removed", recomputes: [], removes: ["ops_company_creator"]) { c in
            c.funnels.removeAll { $0.name == "ops_company_creator" }
        },
        Edit(name: "a target changed", recomputes: []) { c in
            editing("yoked_onboarding", in: &c) {
                $0.targets[0].bound = .atLeast(0.7)
                $0.minSupport = 5
                $0.alerts.minEffect = 0.05
            }
            c.funnels.reverse()
        },
        Edit(name: "an app's time zone set", recomputes: ["forma_onboarding"], reason: "time zone UTC → Asia/Tokyo") { c in
            if let index = c.apps.firstIndex(where: { $0.name == "forma" }) { c.apps[index].timeZone = "Asia/Tokyo" }
        },
    ]

    @Test("after an edit, the next run recomputes only the changed funnels, and its tables equal a rebuild's", arguments: edits)
    func editedConfiguration(_ edit: Edit) async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let before = bundledConfiguration
        var after = before
        edit.apply(&after)
        let events = EventSeeder.journeys(configuration: before, personsPerFunnel: 120, seed: 17, detours: true)
        let cut = events.map(\.timestamp).sorted()[events.count * 3 / 4]
        let day: Int64 = 86_400_000_000
        let night = Timestamps.microseconds(Date())
        try await pool.withConnection { c in try EventSeeder.insert(c, events.filter { $0.timestamp < cut }) }
        _ = try await pool.withConnection { c in
            try ProjectionJob(configuration: before, showProgress: false).run(c, mode: .incremental, now: night - day)
        }
        try await pool.withConnection { c in try EventSeeder.insert(c, events.filter { $0.timestamp >= cut }) }

        let job = ProjectionJob(configuration: after, showProgress: false)
        let preview = try await pool.withConnection { c in try job.preview(c) }
        let summary = try await pool.withConnection { c in try job.run(c, mode: .incremental, now: night) }
        #expect(summary.definitions.recompute.map(\.funnel) == edit.recomputes)
        #expect(summary.definitions.removed == edit.removes)
        #expect(summary.definitions.recompute.allSatisfy { $0.reason.contains(edit.reason) }, "\(summary.definitions.recompute)")
        #expect(summary.definitions.recompute.allSatisfy { $0.events > 0 })
        #expect(preview == summary.definitions, "the dry run foretells the run")
        let unchanged = Set(after.funnels.map(\.name)).subtracting(edit.recomputes)
        // New events are read for the funnels kept incremental; the others read the whole log.
        let incrementalApps = Set(after.funnels.filter { unchanged.contains($0.name) }.map(\.app))
        #expect(summary.newEvents == events.filter { $0.timestamp >= cut && incrementalApps.contains($0.app) }.count)
        #expect(Set(summary.definitions.unchanged) == unchanged)
        // The unchanged funnels' rows stand as the night before built them.
        let built = try await pool.query("SELECT funnel, (extract(epoch FROM built_at) * 1000000)::int8 FROM funnel_definitions")
        var builtAt: [String: Int64] = [:]
        for row in built.rows { builtAt[try row.decode(String.self, at: 0)] = try row.decode(Int64.self, at: 1) }
        #expect(Set(builtAt.keys) == Set(after.funnels.map(\.name)))
        for funnel in unchanged { #expect(builtAt[funnel] == night - day, "\(funnel) was recomputed") }
        for funnel in edit.recomputes { #expect(builtAt[funnel] == night, "\(funnel) was not recomputed") }
        let incremental = try await pool.withConnection { try Self.dump($0) }
        #expect((incremental["funnel_persons"]?.count ?? 0) > 300)
        #expect(try await pool.withConnection { c in try job.preview(c) }.isEmpty, "nothing left to recompute")

        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: night) }
        let rebuilt = try await pool.withConnection { try Self.dump($0) }
        for table in rebuilt.keys.sorted() {
            #expect(incremental[table] == rebuilt[table], "\(table) differs from a rebuild after \(edit.name)")
        }
        for funnel in edit.removes {
            for table in ["funnel_persons", "funnel_cohorts", "funnel_tallies", "funnel_targets", "funnel_driver_counts"] {
                #expect(try await pool.query("SELECT count(*) FROM \(table) WHERE funnel = $1", [.text(funnel)]).scalar(Int.self) == 0)
            }
        }
        await pool.close()
        try await db.drop()
    }

    /// Every table the job writes, and the stored definitions without their time.
    static func dump(_ c: Connection) throws -> [String: [String]] {
        var tables = try TableDump.dump(c)
        for (name, sql) in [
            ("funnel_retention", TableDump.retentionQuery),
            ("funnel_definitions", "SELECT funnel, app, fingerprint, definition::text FROM funnel_definitions ORDER BY funnel"),
        ] {
            tables[name] = try TableDump.rows(c, sql)
        }
        return tables
    }

    @Test("a report in another time zone re-slices the stored days and writes none; its definition is the configured zone's")
    func reportTimeZoneWritesNoCohortDay() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = ProjectionJob(configuration: bundledConfiguration, showProgress: false)
        let events = EventSeeder.journeys(configuration: bundledConfiguration, personsPerFunnel: 80, seed: 5)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        let now = Timestamps.microseconds(Date())
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental, now: now) }
        let stored = try await pool.withConnection { try Self.dump($0) }
        let outcome = try await NightlyRun.run(
            job, mode: .incremental, query: ReportQuery(timeZoneOverride: "America/Los_Angeles"), databaseURL: db.url, now: now)
        #expect(outcome.summary.definitions.isEmpty)
        #expect(outcome.results.allSatisfy { $0.report.timeZone == "America/Los_Angeles" && $0.report.recomputed == nil })
        #expect(try await pool.withConnection { try Self.dump($0) } == stored)
        #expect(try await pool.query("SELECT count(*) FROM funnel_tallies WHERE time_zone <> 'UTC'").scalar(Int.self) == 0)
        await pool.close()
        try await db.drop()
    }

    @Test("a first run computes every funnel and says they are new; the report's JSON says why each was recomputed")
    func firstRunSaysNew() async throws {
        let db = try await TestDatabase.create()
        let events = EventSeeder.journeys(configuration: bundledConfiguration, personsPerFunnel: 40, seed: 9)
        try await db.pool(maxConnections: 1).withConnection { c in try EventSeeder.insert(c, events) }
        var job = ProjectionJob(configuration: bundledConfiguration, showProgress: false)
        let said = Said()
        job.announce = { said.append($0) }
        let outcome = try await NightlyRun.run(job, mode: .incremental, query: ReportQuery(), databaseURL: db.url)
        #expect(outcome.summary.definitions.recompute.map(\.funnel) == bundledConfiguration.funnels.map(\.name))
        #expect(outcome.results.allSatisfy { $0.report.recomputed?.reason == "new funnel" && ($0.report.recomputed?.events ?? 0) > 0 })
        #expect(said.lines.count == bundledConfiguration.funnels.count)
        #expect(said.lines.allSatisfy { $0.contains("new funnel: will be recomputed from the whole log") })
        let again = try await NightlyRun.run(job, mode: .incremental, query: ReportQuery(), databaseURL: db.url)
        #expect(again.summary.definitions.isEmpty && again.results.allSatisfy { $0.report.recomputed == nil })
        #expect(said.lines.count == bundledConfiguration.funnels.count)
        try await db.drop()
    }
}

/// Lines a run announced.
final class Said: Sendable {
    private let box = NIOLockedValueBox<[String]>([])
    func append(_ line: String) { box.withLockedValue { $0.append(line) } }
    var lines: [String] { box.withLockedValue { $0 } }
}
