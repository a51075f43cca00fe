import Foundation
import Funnels
import LibPQ
import LocalPostgres
@testable import Projection
import TestSupport
import Testing

/// The event catalogue counted on the rebuild's own read of the histories
/// (`EventCatalogTally`) against the same catalogue counted from the log in
/// SQL, table for table.
@Suite("the event catalogue counted on the job's read, on a real PostgreSQL")
struct EventCatalogReadTests {
    /// Events that read differently in COPY than they are stored: escapes in
    /// ids and properties, a missing version beside an empty one (one
    /// device's, on one day, too), event
    /// names spelt in two canonically equivalent ways, days cut across a
    /// change of clocks, and an app without funnels.
    static func events(configuration: FunnelConfiguration) -> [SeedEvent] {
        var events = EventSeeder.journeys(configuration: configuration, personsPerFunnel: 25, seed: 23, aliases: true)
            + CompanyLog.events(seed: 6)
        for index in events.indices {
            switch index % 9 {
            case 0: events[index].properties = #"{"plan": {"tier": "pro", "seats": 3, "deep": {"a": {"b": {"c": 1}}}}, "tags": ["a"], "n": null}"#
            case 1: events[index].properties = #"{"quote": "say \"hi\"\tthen\\go", "ünï": "✓", "dotted.key": true}"#
            case 2: events[index].context = #"{"os": {"name": "Android"}}"#
            case 3: events[index].context = #"{"os": {"name": "iOS"}, "app": {"version": ""}}"#
            default: break
            }
        }
        // One name in two spellings Swift's strings compare as equal and the server keeps apart.
        for (n, name) in ["caf\u{E9}_opened", "cafe\u{301}_opened"].enumerated() {
            events.append(SeedEvent(app: "umuve", messageId: "spelling-\(n)", event: name, anonymousId: "speller", timestamp: events[0].timestamp))
        }
        // One device's event on one day with its version missing, then empty: SQL keys the two as one label, listed once in the senders' keys.
        for (n, context) in [#"{"os": {"name": "iOS"}}"#, #"{"os": {"name": "iOS"}, "app": {"version": ""}}"#].enumerated() {
            var event = SeedEvent(
                app: "umuve", messageId: "versionless-\(n)", event: "opened", anonymousId: "versionless", timestamp: events[0].timestamp + Int64(n))
            event.context = context
            events.append(event)
        }
        // Ids COPY escapes, sent on both sides of New York's change of clocks.
        let change = Timestamps.microseconds(ISO8601DateFormatter().date(from: "2026-11-01T06:30:00Z") ?? Date())
        for (offset, id) in ["tab\tid", "back\\slash", "new\nline", "plain", "ünïcode"].enumerated() {
            for hour in -3...3 {
                events.append(SeedEvent(
                    app: "yoked", messageId: "dst-\(offset)-\(hour)", event: "onboarding_started", anonymousId: id,
                    timestamp: change + Int64(hour) * 3_600_000_000 + Int64(offset)))
            }
        }
        // A summer evening in forma's zone, CET: PostgreSQL reads the name as a fixed UTC+1, Foundation as Central European time.
        let summer = Timestamps.microseconds(ISO8601DateFormatter().date(from: "2026-07-01T22:30:00Z") ?? Date())
        for n in 0..<3 {
            events.append(SeedEvent(
                app: "forma", messageId: "summer-\(n)", event: "onboarding_step_viewed", anonymousId: "summer-\(n)",
                timestamp: summer + Int64(n) * 60_000_000))
        }
        // An app no funnel reads: counted in SQL beside the tallies.
        for n in 0..<20 {
            events.append(SeedEvent(
                app: "unfunneled", messageId: "u-\(n)", event: "opened", anonymousId: "d\(n % 7)",
                timestamp: change - Int64(n) * 86_400_000_000, properties: #"{"k": \#(n)}"#))
        }
        return events
    }

    @Test("a first rebuild's catalogue, counted on its read of each app (days cut in New York for one app and in CET, a name PostgreSQL and Foundation read apart, for another; property objects kept or left to SQL; an app's erasure), equals the catalogue counted whole from the log in SQL")
    func countedOnTheReadEqualsSQL() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        var configuration = try FunnelConfiguration.default()
        configuration.funnels.append(CompanyLog.funnel)
        for (app, zone) in [("yoked", "America/New_York"), ("forma", "CET")] {
            if let index = configuration.apps.firstIndex(where: { $0.name == app }) {
                configuration.apps[index].timeZone = zone
            } else {
                configuration.apps.append(AppConfiguration(name: app, timeZone: zone))
            }
        }
        let events = Self.events(configuration: configuration)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        let tables = ["event_catalog_days", "event_catalog_properties", "event_catalog_senders"]

        // Counted in SQL: an incremental run finds the catalogue's days cut in other zones and counts it whole.
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild) }
        try await pool.query("UPDATE event_catalog_state SET zones = 'elsewhere'")
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        let sql = try await pool.withConnection { try TableDump.dump($0) }
        #expect(try await pool.query("SELECT count(*) FROM event_catalog_days WHERE app = 'unfunneled'").scalar(Int.self) > 0)

        for (name, shapes) in [("keeping every object", EventCatalogTally.ShapeLimit()), ("leaving the paths to SQL", .init(count: 1))] {
            var counting = ProjectionJob(configuration: configuration, showProgress: false)
            counting.options.catalogueShapes = shapes
            counting.options.eventsPerPartition = 50
            let job = counting
            try await pool.query("UPDATE event_catalog_state SET zones = 'elsewhere'")
            _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild) }
            let read = try await pool.withConnection { try TableDump.dump($0) }
            for table in tables {
                #expect(read[table] == sql[table], "\(name): \(table)")
                #expect((read[table] ?? []).count > 10, "\(name): \(table)")
            }
        }

        // A rebuild after an erasure counts the erased app whole on its read, the other apps carried on.
        try await pool.withConnection { c in
            try c.executeScript(
                """
                BEGIN; SET LOCAL ROLE onramp_privacy;
                DELETE FROM events WHERE app = 'ops' AND anonymous_id IN (SELECT anonymous_id FROM events WHERE app = 'ops' LIMIT 5);
                COMMIT;
                """)
        }
        let request = try await pool.query(
            "INSERT INTO privacy_requests (kind, app, requested_by, id_hashes) VALUES ('erase', 'ops', 'test', '{}') RETURNING id"
        ).scalar(Int64.self)
        try await pool.query("INSERT INTO privacy_pending (app, person_id, request_id) VALUES ('ops', 'someone', $1)", [.int(request)])
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild) }
        let erased = try await pool.withConnection { try TableDump.dump($0) }
        #expect(try await pool.query("SELECT count(*) FROM privacy_pending").scalar(Int.self) == 0)
        try await pool.query("UPDATE event_catalog_state SET zones = 'elsewhere'")
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        let recounted = try await pool.withConnection { try TableDump.dump($0) }
        for table in tables {
            #expect(erased[table] == recounted[table], "after an erasure: \(table)")
            #expect(erased[table] != sql[table], "after an erasure: \(table) changed")
        }
        await pool.close()
        try await db.drop()
    }
}
