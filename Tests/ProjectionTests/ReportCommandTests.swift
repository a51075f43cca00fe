import Foundation
import Funnels
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// `onramp report` and `onramp rebuild` as a scheduler runs them: the real binary.
@Suite("onramp report / rebuild commands")
struct ReportCommandTests {
    static let configuration = bundledConfiguration

    @Test("a run killed with SIGKILL at random points, then rerun, gives the same tables as an uninterrupted run")
    func killedRunThenRerun() async throws {
        let events = EventSeeder.journeys(configuration: Self.configuration, personsPerFunnel: 2500, seed: 11)
        let reference = try await TestDatabase.create()
        let victim = try await TestDatabase.create()
        for db in [reference, victim] {
            let pool = db.pool(maxConnections: 1)
            try await pool.withConnection { c in try EventSeeder.insert(c, events) }
            await pool.close()
        }
        let started = Date()
        let clean = try OnrampBinary.run(["report", "--database-url", reference.url, "--quiet", "--format", "json"])
        #expect(clean.status == 0, "\(clean.stderr)")
        let duration = Date().timeIntervalSince(started)

        var rng = SplitMix(seed: 99)
        var kills = 0
        for _ in 0..<3 {
            let fraction = 0.15 + Double(rng.next() % 70) / 100
            let killed = try OnrampBinary.runAndKill(
                ["report", "--database-url", victim.url, "--quiet"], after: duration * fraction)
            if killed { kills += 1 }
            let pool = victim.pool(maxConnections: 1)
            // A killed client's backend lets go of the job's lock only when it next
            // touches the socket; a scheduler's next run comes hours later, so wait
            // for that here rather than count a "busy" exit as a rerun.
            for _ in 0..<300 {
                if try await pool.query("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").scalar(Int.self) == 0 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(try await pool.query("SELECT count(*) FROM funnel_persons").scalar(Int.self) == 0 || !killed)
            await pool.close()
        }
        #expect(kills >= 1, "the job finished before every kill; nothing was interrupted")
        let rerun = try OnrampBinary.run(["report", "--database-url", victim.url, "--quiet"])
        #expect(rerun.status == 0, "\(rerun.stderr)")

        let a = reference.pool(maxConnections: 1)
        let b = victim.pool(maxConnections: 1)
        let expected = try await a.withConnection { try TableDump.dump($0) }
        let actual = try await b.withConnection { try TableDump.dump($0) }
        #expect((expected["funnel_persons"]?.count ?? 0) > 5000)
        for table in TableDump.queries.keys.sorted() {
            #expect(actual[table] == expected[table], "\(table) differs after kill + rerun")
        }
        await a.close()
        await b.close()
        try await reference.drop()
        try await victim.drop()
    }

    @Test("report prints the documented JSON shape, writes every format with --out, and flags missed targets")
    func formatsAndTargets() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        try await pool.withConnection { c in
            try EventSeeder.insert(c, EventSeeder.journeys(configuration: Self.configuration, personsPerFunnel: 200, seed: 5))
        }
        await pool.close()
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("report-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: out) }
        let run = try OnrampBinary.run(
            ["report", "--database-url", db.url, "--format", "json", "--out", out.path, "--funnel", "yoked_onboarding",
             "--funnel", "ops_employee"])
        #expect(run.status == 0, "\(run.stderr)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        let funnels = try #require(document["funnels"] as? [[String: Any]])
        #expect(funnels.map { $0["funnel"] as? String } == ["yoked_onboarding", "ops_employee"])
        let yoked = funnels[0]
        #expect(yoked["app"] as? String == "yoked")
        #expect(yoked["window_seconds"] as? Int == 86_400)
        let steps = try #require(yoked["steps"] as? [[String: Any]])
        #expect(steps.count == 12)
        #expect(steps.first?["name"] as? String == "onboarding_started")
        #expect(steps.first?["conversion_from_previous"] as? Double == 1.0)
        for key in ["index", "persons", "conversion_from_start", "drop_off", "median_seconds_from_previous"] {
            #expect(steps[0].keys.contains(key), "step field \(key)")
        }
        let completion = try #require(yoked["completion_rate"] as? [String: Any])
        let ci = try #require(completion["ci95"] as? [Double])
        let value = try #require(completion["value"] as? Double)
        #expect(ci.count == 2 && ci[0] <= value && value <= ci[1])
        #expect((yoked["time_to_complete_seconds"] as? [String: Any])?.keys.contains("p90") == true)
        let targets = try #require(yoked["targets"] as? [[String: Any]])
        #expect(Set(targets.compactMap { $0["name"] as? String }) == ["completion_rate", "median_time_to_complete", "verification_success"])
        let cohorts = try #require(yoked["cohorts"] as? [[String: Any]])
        #expect(!cohorts.isEmpty && cohorts.allSatisfy { $0["in_progress"] as? Bool == false })
        let breakdowns = try #require(funnels[1]["breakdowns"] as? [String: Any])
        #expect(Set(breakdowns.keys) == ["context.os.name", "context.app.version", "properties.auth_method", "properties.flow_version"])
        let started = try #require(yoked["started"] as? Int)
        #expect(steps[0]["persons"] as? Int == started)

        for name in ["report.txt", "report.md", "report.csv", "report.json", "index.html", "yoked_onboarding.html", "ops_employee.html"] {
            #expect(FileManager.default.fileExists(atPath: out.appendingPathComponent(name).path), "\(name)")
        }
        let csv = try String(contentsOf: out.appendingPathComponent("report.csv"), encoding: .utf8)
        // Regressions and improvements first; the per-step section; the diagnostics' sections; retention, each after a blank line.
        let sections = csv.components(separatedBy: "\n\n")
        #expect(sections.count == 5)
        #expect(sections[4].hasPrefix("funnel,cohort_day,day,outcome,eligible,retained,pending,rate"))
        #expect(sections[0].hasPrefix("direction,funnel,kind,metric,step,"))
        #expect(sections[1].split(separator: "\n").count == 1 + 12 + 7)
        #expect(sections[3].hasPrefix("funnel,from_index,to_index,kind,dimension,value,persons,converted,dropped"))

        // The seeded yoked journeys complete far less than 60 %: the target is missed.
        let strict = try OnrampBinary.run(["report", "--database-url", db.url, "--fail-on-missed-targets", "--quiet"])
        #expect(strict.status == 3)
        #expect(strict.stderr.contains("missed targets: yoked_onboarding.completion_rate"))
        #expect(strict.stdout.contains("MISSED completion_rate"))
        let table = try OnrampBinary.run(["report", "--database-url", db.url, "--quiet", "--funnel", "umuve_onboarding"])
        #expect(table.stdout.contains("umuve_onboarding (app umuve)"))
        #expect(table.stdout.contains("onboarding_screen_viewed"))
        let bad = try OnrampBinary.run(["report", "--database-url", db.url, "--funnel", "nope"])
        #expect(bad.status != 0 && bad.stderr.contains("no funnel named 'nope'"))
        try await db.drop()
    }

    @Test("a bad configuration file names the file, the funnel and the field, and nothing runs")
    func badConfiguration() async throws {
        let db = try await TestDatabase.create()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("bad-\(UUID().uuidString).yaml")
        try """
            apps: [{name: shop}]
            funnels:
              - name: checkout
                app: shop
                steps:
                  - event: cart_viewed
                  - where: {properties.x: 1}
            """.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try OnrampBinary.run(["report", "--database-url", db.url, "--config", file.path])
        #expect(run.status != 0)
        #expect(run.stderr.contains(file.lastPathComponent))
        #expect(run.stderr.contains("checkout"))
        #expect(run.stderr.contains("steps[1]"))
        let pool = db.pool(maxConnections: 1)
        #expect(try await pool.query("SELECT horizon_txid FROM projection_checkpoint").scalar(Int64.self) == 0)
        await pool.close()
        try await db.drop()
    }

    @Test("an edited file: --dry-run foretells the recompute and writes nothing; the report says why and equals a rebuild's")
    func editedConfiguration() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        // Forty days back, every retention day (1, 7, 30) of every person has
        // ended: the report and the rebuild run at their own clocks, seconds
        // apart, and a day ending between them would count in one alone.
        let events = EventSeeder.journeys(configuration: Self.configuration, personsPerFunnel: 200, seed: 23, daysAgo: 40, detours: true)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        let first = try OnrampBinary.run(["report", "--database-url", db.url, "--quiet"])
        #expect(first.status == 0, "\(first.stderr)")
        // As a team edits it: a new two-step funnel, and a window cut from 24h to 1h.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let bundled = try String(contentsOf: root.appendingPathComponent("Sources/Funnels/Resources/default-funnels.yaml"), encoding: .utf8)
        let changed = bundled.replacingOccurrences(
            of: "  - name: yoked_onboarding\n    app: yoked\n    window: 24h", with: "  - name: yoked_onboarding\n    app: yoked\n    window: 1h")
            + "\n  - name: yoked_otp\n    app: yoked\n    steps:\n      - event: phone_entered\n      - event: otp_verified\n"
        #expect(changed.contains("window: 1h"))
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("changed-\(UUID().uuidString).yaml")
        try changed.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }

        let stored = try await pool.withConnection { try TableDump.dump($0) }
        let dry = try OnrampBinary.run(["report", "--dry-run", "--database-url", db.url, "--config", file.path])
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout.contains("yoked_onboarding: window 24h → 1h: would be recomputed from the whole log"))
        #expect(dry.stdout.contains("yoked_otp: new funnel: would be recomputed"))
        #expect(dry.stdout.contains("unchanged (incremental): ops_company_creator, ops_employee, ops_companies, umuve_onboarding, forma_onboarding"))
        #expect(try await pool.withConnection { try TableDump.dump($0) } == stored, "the dry run wrote")

        let report = try OnrampBinary.run(["report", "--database-url", db.url, "--config", file.path, "--quiet", "--format", "json"])
        #expect(report.status == 0, "\(report.stderr)")
        #expect(report.stderr.contains("yoked_onboarding: window 24h → 1h: will be recomputed from the whole log"))
        #expect(report.stderr.contains("yoked_otp: new funnel: will be recomputed"))
        let rebuild = try OnrampBinary.run(["rebuild", "--database-url", db.url, "--config", file.path, "--quiet", "--format", "json"])
        #expect(rebuild.status == 0, "\(rebuild.stderr)")
        func funnels(_ json: String) throws -> [String: [String: Any]] {
            let document = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
            let list = document?["funnels"] as? [[String: Any]] ?? []
            return Dictionary(list.map { (($0["funnel"] as? String) ?? "", $0) }) { first, _ in first }
        }
        let incremental = try funnels(report.stdout), rebuilt = try funnels(rebuild.stdout)
        #expect(Set(incremental.keys) == Set(Self.configuration.funnels.map(\.name) + ["yoked_otp"]))
        let reason = incremental["yoked_onboarding"]?["recomputed"] as? [String: Any]
        #expect(reason?["reason"] as? String == "window 24h → 1h")
        #expect((reason?["events"] as? Int ?? 0) == events.filter { $0.app == "yoked" }.count)
        #expect((incremental["ops_employee"]?["recomputed"]) is NSNull)
        for (name, funnel) in incremental {
            var a = funnel, b = rebuilt[name] ?? [:]
            a["recomputed"] = nil
            b["recomputed"] = nil
            #expect(NSDictionary(dictionary: a).isEqual(to: b), "\(name) differs from the rebuild's")
        }
        #expect((incremental["yoked_otp"]?["completed"] as? Int ?? 0) > 0)
        await pool.close()
        try await db.drop()
    }
}
