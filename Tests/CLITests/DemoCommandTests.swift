import Foundation
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// `onramp demo` on an existing database: server, simulated devices through the
/// SDK over HTTP, the nightly report — the whole pipeline, as a user runs it.
@Suite("onramp demo")
struct DemoCommandTests {
    @Test("the demo runs the pipeline end to end, twice, and the report shows the simulated variant difference")
    func demoEndToEnd() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("demo-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: out) }
        let run = try OnrampBinary.run(
            ["demo", "--database-url", db.url, "--devices", "400", "--days", "5", "--seed", "7", "--out", out.path])
        #expect(run.status == 0, "\(run.stderr.suffix(3000))")
        for funnel in ["yoked_onboarding", "ops_company_creator", "ops_employee", "ops_companies", "umuve_onboarding", "forma_onboarding"] {
            #expect(run.stdout.contains("\(funnel) (app "), "\(funnel) missing from the report")
            #expect(FileManager.default.fileExists(atPath: out.appendingPathComponent("\(funnel).html").path))
        }
        #expect(run.stderr.contains("0 rejected"))
        #expect(run.stderr.contains("the HTML dashboard is at"))

        let pool = db.pool(maxConnections: 1)
        // Every app got traffic; identify linked devices to users; skewed clocks were corrected.
        let apps = try await pool.query("SELECT app FROM events GROUP BY app ORDER BY app").rows.map { try $0.decode(String.self, at: 0) }
        #expect(apps == ["forma", "ops", "umuve", "yoked"])
        #expect(try await pool.query("SELECT count(*) FROM identity_links").scalar(Int.self) > 50)
        #expect(try await pool.query("SELECT count(*) FROM events WHERE \"timestamp\" > received_at + interval '1 minute'").scalar(Int.self) == 0)
        // Ops' creators set companies up and employees joined them, through the SDK's group calls; the funnel by company counts them.
        #expect(try await pool.query("SELECT count(*) FROM analytics.groups WHERE app = 'ops' AND traits ? 'name' AND members > 1").scalar(Int.self) > 3)
        #expect(try await pool.query(
            "SELECT count(*) FROM analytics.funnel_persons WHERE funnel = 'ops_companies' AND completed AND group_id IS NOT NULL").scalar(Int.self) > 0)
        // Devices that re-sent batches did not create duplicates.
        #expect(try await pool.query("SELECT count(*) - count(DISTINCT (app, message_id)) FROM events").scalar(Int.self) == 0)

        let json = try Data(contentsOf: out.appendingPathComponent("report.json"))
        let document = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        let employee = try #require((document["funnels"] as? [[String: Any]])?.first { $0["funnel"] as? String == "ops_employee" })
        let versions = try #require((employee["breakdowns"] as? [String: Any])?["properties.flow_version"] as? [[String: Any]])
        func rate(_ v: String) -> Double? {
            ((versions.first { $0["value"] as? String == v })?["completion_rate"] as? [String: Any])?["value"] as? Double
        }
        let v2 = try #require(rate("v2"))
        let v3 = try #require(rate("v3"))
        #expect(v3 > v2, "the consolidated flow (v3) should convert better: v2 \(v2), v3 \(v3)")

        // A second run on the same database works too (migrations are a no-op, new devices are added).
        let again = try OnrampBinary.run(["demo", "--database-url", db.url, "--devices", "50", "--days", "2", "--out", out.path])
        #expect(again.status == 0, "\(again.stderr.suffix(2000))")
        #expect(again.stderr.contains("0 applied"))
        await pool.close()
        try await db.drop()
    }
}
