import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection
import TestSupport
import Testing

/// A tracking plan the app does not enforce: every message is stored, and
/// `analytics.tracking_violations` counts what broke it, against plain SQL
/// over `analytics.events` (docs/tracking-health.md).
@Suite("tracking plans, on a real PostgreSQL")
struct TrackingPlanTests {
    @Test("unplanned events, missing or null required properties and mistyped ones, per label and version, equal plain SQL over analytics.events after two nights")
    func violationsAgainstSQL() async throws {
        var configuration = try FunnelConfiguration.default()
        let index = try #require(configuration.apps.firstIndex { $0.name == "yoked" })
        configuration.apps[index].trackingPlan = TrackingPlan(entries: [
            .init(kind: .event, name: "onboarding_started"),
            .init(kind: .event, name: "phone_entered"),
            .init(kind: .event, name: "otp_verified", properties: ["method": .string, "attempt.number": .number]),
        ])
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        var events = EventSeeder.journeys(configuration: configuration, personsPerFunnel: 40, seed: 21).filter { $0.app == "yoked" || $0.app == "ops" }
        var n = 0
        for i in events.indices where events[i].event == "otp_verified" {
            n += 1
            events[i].properties = [
                #"{"method": "sms", "attempt": {"number": 1}}"#, #"{"method": 7, "attempt": {"number": 1}}"#, #"{"attempt": {"number": "2"}}"#,
                #"{"method": null}"#, #"{"method": "call", "attempt": 3}"#,
            ][n % 5]
            if n % 3 == 0 { events[i].context = #"{"os": {"name": "Android"}, "app": {"version": "2.4.0"}}"# }
        }
        let half = events.count / 2
        for night in [Array(events[..<half]), Array(events[half...])] {
            try await pool.withConnection { c in try EventSeeder.insert(c, night) }
            _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        }

        let stored = Set(try await pool.query(
            """
            SELECT app || '|' || label || '|' || coalesce(app_version, '') || '|' || rule || '|' || coalesce(property, '') || '|'
                   || coalesce(seen_type, '') || '|' || events
            FROM analytics.tracking_violations
            """
        ).rows.map { $0.text(at: 0) ?? "" })
        // The same, from the log: yoked's plan names three events.
        let reference = Set(try await pool.query(
            """
            WITH e AS (SELECT * FROM analytics.events WHERE app = 'yoked' AND type IN ('track', 'screen')),
            planned(event) AS (VALUES ('onboarding_started'), ('phone_entered'), ('otp_verified')),
            required(path, expected) AS (VALUES ('{method}'::text[], 'string'), ('{attempt,number}'::text[], 'number'))
            SELECT 'yoked|' || CASE WHEN type = 'track' THEN 'event: ' ELSE 'screen: ' END || event || '|' || coalesce(app_version, '')
                   || '|unplanned_event|||' || count(*)
            FROM e WHERE NOT (type = 'track' AND event IN (SELECT event FROM planned))
            GROUP BY type, event, app_version
            UNION ALL
            SELECT 'yoked|event: otp_verified|' || coalesce(app_version, '') || '|missing_property|properties.' || array_to_string(r.path, '.')
                   || '||' || count(*)
            FROM e, required r
            WHERE e.event = 'otp_verified' AND coalesce(jsonb_typeof(e.properties #> r.path), 'null') = 'null'
            GROUP BY app_version, r.path
            UNION ALL
            SELECT 'yoked|event: otp_verified|' || coalesce(app_version, '') || '|wrong_type|properties.' || array_to_string(r.path, '.')
                   || '|' || jsonb_typeof(e.properties #> r.path) || '|' || count(*)
            FROM e, required r
            WHERE e.event = 'otp_verified' AND jsonb_typeof(e.properties #> r.path) NOT IN (r.expected, 'null')
            GROUP BY app_version, r.path, jsonb_typeof(e.properties #> r.path)
            """
        ).rows.map { $0.text(at: 0) ?? "" })
        #expect(stored == reference, "only stored: \(stored.subtracting(reference).sorted())\nonly in SQL: \(reference.subtracting(stored).sorted())")
        #expect(Set(stored.map { $0.split(separator: "|")[3] }) == ["unplanned_event", "missing_property", "wrong_type"])
        // ops has no plan: nothing of it is a violation; every message was stored.
        #expect(!stored.contains { $0.hasPrefix("ops|") })
        #expect(try await pool.query("SELECT count(*) FROM events").scalar(Int.self) == Set(events.map(\.messageId)).count)
        await pool.close()
        try await db.drop()
    }

    @Test("a tracking plan's mistakes stop the configuration, naming the app and the field", arguments: [
        ("tracking_plan: {events: [{event: a, properties: {x: integer}}]}", "tracking_plan.events[0].properties.x", "expected a JSON type"),
        ("tracking_plan: {events: [{event: a, screen: b}]}", "tracking_plan.events[0]", "exactly one of 'event' or 'screen'"),
        ("tracking_plan: {events: [{event: a}, {event: a}]}", "tracking_plan.events[1]", "planned twice"),
        ("tracking_plan: {enforced: true, events: []}", "tracking_plan.enforced", "unknown field"),
        ("tracking_plan: {enforce: true}", "tracking_plan.events", "missing"),
        ("tracking_plan: {events: [{event: a, properties: {a.b.c.d.e: string}}]}", "tracking_plan.events[0].properties.a.b.c.d.e", "four keys deep"),
    ])
    func badPlans(plan: String, field: String, message: String) throws {
        let yaml = """
            apps:
              - name: yoked
                \(plan)
            funnels:
              - {name: f, app: yoked, steps: [{event: a}, {event: b}]}
            """
        #expect {
            _ = try FunnelConfiguration.parse(yaml: yaml, source: "plan.yaml")
        } throws: { error in
            let text = "\(error)"
            return text.contains("plan.yaml") && text.contains("yoked") && text.contains(field) && text.contains(message)
        }
    }
}
