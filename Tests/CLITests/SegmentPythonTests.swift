import Foundation
import Funnels
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// Segment's own analytics-python, as a server-side app uses it, posting an
/// `alias` and a `group` to `onramp serve`; then the nightly job.
@Suite("Segment's analytics-python against onramp serve")
struct SegmentPythonTests {
    /// The venv `scripts/test` makes (`$ONRAMP_TOOLS/segment`, default ~/.cache/onramp/segment).
    static var python: String? {
        let environment = ProcessInfo.processInfo.environment
        let tools = environment["ONRAMP_TOOLS"].flatMap { $0.isEmpty ? nil : $0 }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache/onramp").path
        let python = "\(tools)/segment/bin/python"
        return FileManager.default.isExecutableFile(atPath: python) ? python : nil
    }

    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/lib/segment_python.py").path
    }

    @Test(
        "alias and group from analytics-python are stored whole, and the job joins the person across both aliases",
        .enabled(if: python != nil, "needs segment-analytics-python in $ONRAMP_TOOLS/segment (scripts/test installs it)"))
    func aliasAndGroup() async throws {
        let python = try #require(Self.python)
        let db = try await TestDatabase.create()
        let key = try OnrampBinary.run(["keys", "create", "--app", "yoked", "--database-url", db.url]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let server = try await PrivacyCommandTests.Server(databaseURL: try db.url(as: "onramp_writer"))
        defer { server.stop() }
        try await server.ready(key: key)

        let sent = try ChildProcess.run([python, Self.script, server.base.absoluteString, key, "py"])
        #expect(sent.exit.status == 0, "\(sent.output)")
        let line = sent.output.split(separator: "\n").last.map(String.init) ?? ""
        let answer = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        #expect((answer?["errors"] as? [String]) == [], "\(sent.output)")

        let pool = db.pool(maxConnections: 1)
        // Stored whole: the alias's previous id, the group's id and traits, the library that sent them.
        let rows = try await pool.query(
            """
            SELECT type, coalesce(event, ''), coalesce(anonymous_id, ''), coalesce(user_id, ''), coalesce(previous_id, ''),
                   coalesce(group_id, ''), coalesce(traits ->> 'name', ''), context #>> '{library,name}'
            FROM analytics.events WHERE app = 'yoked' AND coalesce(user_id, anonymous_id) LIKE 'py-%' ORDER BY "timestamp"
            """
        ).rows.map { row in try (0..<7).map { try row.decode(String.self, at: $0) }.joined(separator: "|") + "|" + (try row.decode(String.self, at: 7)) }
        #expect(rows == [
            "screen|welcome|py-device||||" + "|analytics-python",
            "track|sign_up_started|py-device||||" + "|analytics-python",
            "alias|||py-user|py-device||" + "|analytics-python",
            "track|otp_verified||py-user|||" + "|analytics-python",
            "group|||py-user||py-company|Acme|analytics-python",
            "alias|||py-renamed|py-user||" + "|analytics-python",
            "track|profile_created||py-renamed|||" + "|analytics-python",
        ])

        // The nightly job follows both aliases: one person, as analysts read it and in the funnel tables.
        let report = try OnrampBinary.run(["report", "--database-url", db.url, "--format", "json"])
        #expect(report.status == 0, "\(report.stderr)")
        let persons = try await pool.query(
            "SELECT DISTINCT person_id FROM analytics.events WHERE app = 'yoked' AND coalesce(user_id, anonymous_id) LIKE 'py-%'"
        ).rows.map { try $0.decode(String.self, at: 0) }
        #expect(persons == ["py-renamed"])
        let groups = try await pool.query("SELECT traits ->> 'employees', members FROM analytics.groups WHERE group_id = 'py-company'").rows
        #expect(groups.count == 1)
        #expect(try groups.first?.decode(String.self, at: 0) == "12")
        #expect(try groups.first?.decode(Int.self, at: 1) == 1)
        #expect(try await pool.query("SELECT person_id FROM analytics.group_members WHERE group_id = 'py-company'").scalar(String.self) == "py-renamed")
        #expect(try await pool.query("SELECT count(*) FROM funnel_persons WHERE person_id LIKE 'py-%' AND person_id <> 'py-renamed'").scalar(Int.self) == 0)
        await pool.close()
        try await db.drop()
    }

    @Test(
        "companies set up and joined through analytics-python are counted by the shipped funnel by company, as window_funnel counts them",
        .enabled(if: python != nil, "needs segment-analytics-python in $ONRAMP_TOOLS/segment (scripts/test installs it)"))
    func companiesByGroup() async throws {
        let python = try #require(Self.python)
        let db = try await TestDatabase.create()
        let key = try OnrampBinary.run(["keys", "create", "--app", "ops", "--database-url", db.url]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let server = try await PrivacyCommandTests.Server(databaseURL: try db.url(as: "onramp_writer"))
        defer { server.stop() }
        try await server.ready(key: key)
        let sent = try ChildProcess.run([python, Self.script, server.base.absoluteString, key, "py", "companies"])
        #expect(sent.exit.status == 0, "\(sent.output)")
        #expect(sent.output.contains(#""errors": []"#), "\(sent.output)")

        let report = try OnrampBinary.run(["report", "--database-url", db.url, "--funnel", "ops_companies", "--format", "json"])
        #expect(report.status == 0, "\(report.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(report.stdout.utf8)) as? [String: Any]
        let funnel = (json?["funnels"] as? [[String: Any]])?.first
        #expect(funnel?["aggregate_by"] as? String == "group")
        #expect(funnel?["started"] as? Int == 2)
        #expect(funnel?["completed"] as? Int == 1)

        // Each company's level, as the job stores it and as window_funnel finds it over its members' events.
        let pool = db.pool(maxConnections: 1)
        var stored: [String: Int] = [:]
        for row in try await pool.query("SELECT group_id, level FROM analytics.funnel_persons WHERE funnel = 'ops_companies'").rows {
            stored[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1)
        }
        let shipped = try #require(try FunnelConfiguration.default().funnel(named: "ops_companies"))
        #expect(stored == ["py-co-1": 4, "py-co-2": 3])
        #expect(stored == (try await pool.withConnection { c in try CompanyLog.referenceLevels(c, funnel: shipped) }))
        await pool.close()
        try await db.drop()
    }
}
