import Foundation
import Funnels
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// `onramp funnel` as an analyst runs it: a definition file, the same
/// funnel in flags, and the nightly report of that funnel configured,
/// agree; bad input is named.
@Suite("onramp funnel, the command")
struct FunnelCommandTests {
    static let definition = """
        name: android_otp
        app: yoked
        window: 1h
        breakdowns: [properties.auth_method]
        steps:
          - {event: phone_entered, where: {context.os.name: Android}}
          - {event: otp_verified, within: 2m}
          - event: profile_created
        """

    static func json(_ text: String) throws -> [String: Any] {
        let start = try #require(text.firstIndex(of: "{"))
        return try #require(try JSONSerialization.jsonObject(with: Data(text[start...].utf8)) as? [String: Any])
    }

    /// The definition as a file of its own and as the only funnel of a
    /// configuration, with a cache for `onramp funnel`, in a directory of
    /// their own.
    struct Files {
        let directory: URL
        let definition: URL
        let configuration: URL
        var cache: String { directory.appendingPathComponent("cache").path }

        init(_ name: String) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            definition = directory.appendingPathComponent("android_otp.yaml")
            try FunnelCommandTests.definition.write(to: definition, atomically: true, encoding: .utf8)
            configuration = directory.appendingPathComponent("funnels.yaml")
            let entry = FunnelCommandTests.definition.split(separator: "\n").enumerated()
                .map { $0.offset == 0 ? "  - \($0.element)" : "    \($0.element)" }.joined(separator: "\n")
            try ("apps: [{name: yoked}]\nfunnels:\n" + entry + "\n").write(to: configuration, atomically: true, encoding: .utf8)
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    /// The nightly report of the configuration's funnel, as JSON.
    static func night(_ db: TestDatabase, _ files: Files) throws -> [String: Any] {
        let report = try OnrampBinary.run(["report", "--database-url", db.url, "--config", files.configuration.path, "--quiet", "--format", "json"])
        #expect(report.status == 0, "\(report.stderr)")
        return try json(report.stdout)
    }

    /// A database with journeys through the shipped funnels and the definition's.
    static func database(seed: UInt64, persons: Int) async throws -> TestDatabase {
        let db = try await TestDatabase.create()
        var configuration = try FunnelConfiguration.default()
        configuration.funnels.append(try FunnelConfiguration.parseFunnel(yaml: definition, source: "test"))
        let events = EventSeeder.journeys(configuration: configuration, personsPerFunnel: persons, seed: seed, detours: true)
        try await ConnectionPool.using(url: db.url) { pool in try await pool.withConnection { c in try EventSeeder.insert(c, events) } }
        return db
    }

    @Test("a definition file, the same funnel in flags and the nightly report of it configured give the same JSON")
    func sameNumbersAsTheNight() async throws {
        let db = try await Self.database(seed: 3, persons: 150)
        let files = try Files("funnel-command")
        defer { files.remove() }
        let (definitionFile, configurationFile, cache) = (files.definition, files.configuration, files.cache)

        let night = try Self.night(db, files)
        let asOf = try #require(night["generated_at"] as? String)
        var configured = try #require((night["funnels"] as? [[String: Any]])?.first { $0["funnel"] as? String == "android_otp" })

        let asked = try OnrampBinary.run([
            "funnel", "--database-url", db.url, "--definition", definitionFile.path, "--as-of", asOf, "--format", "json", "--cache", cache,
            "--diagnostics", "--retention",
        ])
        #expect(asked.status == 0, "\(asked.stderr)")
        #expect(asked.stderr.contains("columns read from the whole log"), "\(asked.stderr)")
        let now = try Self.json(asked.stdout)
        // Whether the night recomputed the funnel is the night's own.
        configured["recomputed"] = nil
        for (key, value) in configured {
            #expect(NSDictionary(dictionary: [key: value]).isEqual(to: [key: now[key] as Any]), "\(key): \(value) ≠ \(now[key] ?? "nothing")")
        }
        #expect((configured["started"] as? Int ?? 0) > 10)
        let trends = try #require(now["trends"] as? [[String: Any]])
        #expect(trends.map { $0["started"] as? Int ?? 0 }.reduce(0, +) == configured["started"] as? Int)
        let histogram = try #require(now["time_to_convert"] as? [[String: Any]])
        #expect(histogram.map { $0["persons"] as? Int ?? 0 }.reduce(0, +) == configured["completed"] as? Int)

        let flags = try OnrampBinary.run([
            "funnel", "--database-url", db.url, "--app", "yoked", "--name", "android_otp", "--window", "1h",
            "--breakdown", "properties.auth_method", "--step", "phone_entered where context.os.name=Android",
            "--step", "otp_verified within 2m", "--step", "profile_created", "--as-of", asOf, "--format", "json", "--cache", cache,
            "--diagnostics", "--retention",
        ])
        #expect(flags.status == 0, "\(flags.stderr)")
        #expect(flags.stderr.contains(", 0 new"), "the store is kept between queries: \(flags.stderr)")
        let fromFlags = try Self.json(flags.stdout)
        for key in configured.keys {
            #expect(NSDictionary(dictionary: [key: configured[key] as Any]).isEqual(to: [key: fromFlags[key] as Any]), "\(key)")
        }

        let table = try OnrampBinary.run(["funnel", "--database-url", db.url, "--definition", definitionFile.path, "--cache", cache, "--quiet"])
        #expect(table.status == 0 && table.stdout.contains("android_otp") && table.stdout.contains("otp_verified"), "\(table.stdout)")
        let html = try OnrampBinary.run(["funnel", "--database-url", db.url, "--definition", definitionFile.path, "--cache", cache, "--format", "html", "--quiet"])
        #expect(html.status == 0 && html.stdout.hasPrefix("<!DOCTYPE html>") && html.stdout.contains("completion-rate"))

        // Bad input: named, never a crash.
        let cases: [([String], String)] = [
            (["--app", "nope", "--step", "a", "--step", "b"], "unknown app 'nope'"),
            (["--app", "yoked", "--step", "onboarding_started"], "at least two steps"),
            (["--app", "yoked", "--step", "a", "--step", "b", "--window", "0"], "window"),
            (["--app", "yoked", "--step", "a", "--step", "b", "--breakdown", "os.name"], "breakdowns"),
            (["--app", "yoked", "--step", "a", "--step", "b within soon"], "within"),
            (["--app", "yoked", "--step", "a where nothing", "--step", "b"], "PATH=VALUE"),
            (["--definition", configurationFile.path], "not a whole configuration"),
            (["--app", "yoked", "--step", "a", "--step", "b", "--from", "yesterday"], "--from"),
            (["--app", "yoked", "--step", "a", "--step", "b", "--to", "2026-1-5"], "--to"),
            (["--app", "yoked", "--step", "a", "--step", "b", "--timeout", "inf"], "--timeout"),
            (["--app", "yoked", "--step", "onboarding_started", "--step", "phone_entered", "--timeout", "0.000001", "--recount"], "timeout"),
        ]
        for (arguments, message) in cases {
            let run = try OnrampBinary.run(["funnel", "--database-url", db.url, "--cache", cache] + arguments)
            #expect(run.status != 0 && run.status < 128, "\(arguments)")
            #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
        }
        try await db.drop()
    }

    @Test("--persons: the terminal lists the same persons from the log and from the night, with traits; bad cells exit 2 with nothing on stdout")
    func persons() async throws {
        let db = try await Self.database(seed: 5, persons: 200)
        let pool = db.pool(maxConnections: 1)
        // Who some of them are: two identify calls each, the later one changing the plan.
        let users = try await pool.query(
            "SELECT DISTINCT user_id FROM events WHERE app = 'yoked' AND user_id IS NOT NULL ORDER BY 1 LIMIT 80").rows.compactMap { $0.text(at: 0) }
        for (n, user) in users.enumerated() {
            for (step, traits) in [(0, #"{"email": "\#(user)@example.com", "plan": "free"}"#), (1, #"{"plan": "pro\#(n % 3)"}"#)] {
                try await pool.query(
                    """
                    INSERT INTO events (app, type, message_id, user_id, "timestamp", received_at, traits)
                    VALUES ('yoked', 'identify', $1, $2, now() - interval '1 hour' + $3 * interval '1 minute', now(), $4::jsonb)
                    """, [.text("traits-\(n)-\(step)"), .text(user), .int(Int64(step)), .text(traits)])
            }
        }
        await pool.close()
        let files = try Files("funnel-persons")
        defer { files.remove() }
        let (definitionFile, configurationFile, cache) = (files.definition, files.configuration, files.cache)
        let night = try Self.night(db, files)
        let asOf = try #require(night["generated_at"] as? String)
        let steps = try #require((night["funnels"] as? [[String: Any]])?.first?["steps"] as? [[String: Any]])

        var checked = 0
        for (cell, expected) in [("reached:1", steps[0]["persons"]), ("dropped:1", steps[0]["drop_off"]), ("converted:2", steps[2]["persons"]),
                                 ("dropped:2", steps[1]["drop_off"])] {
            let traits = ["--traits", "traits.email,plan"]
            let stored = try OnrampBinary.run(
                ["report", "--database-url", db.url, "--config", configurationFile.path, "--funnel", "android_otp", "--persons", cell, "--format", "csv"] + traits)
            let asked = try OnrampBinary.run([
                "funnel", "--database-url", db.url, "--definition", definitionFile.path, "--as-of", asOf, "--cache", cache, "--quiet",
                "--persons", cell, "--format", "csv",
            ] + traits)
            #expect(stored.status == 0 && asked.status == 0, "\(stored.stderr) \(asked.stderr)")
            // Everything but the seconds since the last step, which each takes at its own clock.
            func rows(_ csv: String) -> [[String]] {
                csv.split(separator: "\n").map { line in
                    var fields = CSVLine.fields(String(line))
                    if fields.count > 7 { fields.remove(at: 7) }
                    return fields
                }
            }
            let lines = rows(stored.stdout)
            #expect(lines == rows(asked.stdout), "\(cell)")
            #expect(lines.first?.suffix(3) == ["properties.auth_method", "traits.email", "plan"], "\(lines.first ?? [])")
            #expect(lines.count - 1 == expected as? Int, "\(cell): \(lines.count - 1) listed, the report says \(expected ?? "nothing")")
            // The latest value of each trait, from the identify calls of any of the person's ids.
            for line in lines.dropFirst() where line.count == 10 && !line[8].isEmpty {
                #expect(line[8] == line[0] + "@example.com" && line[9].hasPrefix("pro"), "\(line)")
                #expect(line[1] == "[\"\(line[0])\",\"\(line[0].replacingOccurrences(of: "-user-", with: "-anon-"))\"]", "\(line)")
                checked += 1
            }
        }
        #expect(checked > 5, "persons with traits listed: \(checked)")
        let json = try OnrampBinary.run([
            "funnel", "--database-url", db.url, "--definition", definitionFile.path, "--as-of", asOf, "--cache", cache, "--quiet",
            "--persons", "dropped:1", "--format", "json", "--limit", "3",
        ])
        let listed = try Self.json(json.stdout)
        #expect(listed["total"] as? Int == steps[0]["drop_off"] as? Int && (listed["persons"] as? [Any])?.count == 3, "\(json.stdout)")

        // Where those who dropped at step 1 went: as many as the report's drop-off, level 1 as the table's "did next".
        let paths = try OnrampBinary.run([
            "funnel", "--database-url", db.url, "--definition", definitionFile.path, "--as-of", asOf, "--cache", cache, "--quiet",
            "--paths-after", "1", "--format", "json",
        ])
        let tree = try Self.json(paths.stdout)
        #expect(tree["dropped"] as? Int == steps[0]["drop_off"] as? Int && (tree["next"] as? [Any])?.isEmpty == false, "\(paths.stdout)")
        // The same tree from the night's tables and the log: as of that night, the same.
        let stored = try OnrampBinary.run([
            "report", "--database-url", db.url, "--config", configurationFile.path, "--funnel", "android_otp", "--paths-after", "1", "--format", "json",
        ])
        #expect(stored.status == 0 && stored.stdout == paths.stdout, "\(stored.stderr)\n\(stored.stdout)\n\(paths.stdout)")
        let pathsTable = try OnrampBinary.run([
            "funnel", "--database-url", db.url, "--definition", definitionFile.path, "--as-of", asOf, "--cache", cache, "--quiet",
            "--paths-after", "1", "--horizon", "10m",
        ])
        #expect(pathsTable.status == 0 && pathsTable.stdout.contains("within 10m 0s of the step"), "\(pathsTable.stdout)")
        // Drawn on the dashboard: the funnel's page at query time, a page of its own from the night; the same nodes as the JSON tree.
        let level1 = ((tree["next"] as? [[String: Any]]) ?? []).map { "\($0["label"] ?? "")=\($0["persons"] ?? "")" }
        for command in [
            ["funnel", "--database-url", db.url, "--definition", definitionFile.path, "--as-of", asOf, "--cache", cache, "--quiet"],
            ["report", "--database-url", db.url, "--config", configurationFile.path, "--funnel", "android_otp"],
        ] {
            let page = try OnrampBinary.run(command + ["--paths-after", "1", "--format", "html"])
            #expect(page.status == 0 && page.stdout.contains("<section id=\"paths-after\" data-step=\"1\" data-dropped=\"\(tree["dropped"] ?? "")\">"), "\(command[0]): \(page.stderr)")
            #expect(!page.stdout.contains("<script"))
            let drawn = page.stdout.matches(of: /<g class="path-node [a-z0-9]+" data-depth="1" data-path="([^"]*)" data-persons="(\d+)">/).map { "\($0.1)=\($0.2)" }
            #expect(drawn == level1, "\(drawn) against \(level1)")
        }
        #expect(try OnrampBinary.run(["report", "--database-url", db.url, "--config", configurationFile.path, "--funnel", "android_otp", "--paths-after", "1", "--format", "csv"])
            .stderr.contains("--format with --paths-after must be one of table, json, html (got 'csv')"))
        for (arguments, message) in [(["--paths-after", "3"], "last required step"), (["--paths-after", "0"], "out of range")] {
            let run = try OnrampBinary.run(["funnel", "--database-url", db.url, "--definition", definitionFile.path, "--cache", cache, "--quiet"] + arguments)
            #expect(run.status == 2 && run.stdout.isEmpty && run.stderr.contains(message), "\(arguments): \(run.stderr)")
        }

        // Bad cells: named on stderr, exit 2, nothing on stdout.
        let bad: [([String], String)] = [
            (["--persons", "left:1"], "unknown outcome 'left'"),
            (["--persons", "dropped:9"], "step 9 is out of range"),
            (["--persons", "converted:3"], "last required step"),
            (["--persons", "reached:1", "--breakdown-value", "properties.auth_method=carrier_pigeon"], "no properties.auth_method=carrier_pigeon"),
            (["--persons", "reached:1", "--breakdown-value", "context.os.name=iOS"], "not a breakdown"),
        ]
        for (arguments, message) in bad {
            for command in [
                ["funnel", "--database-url", db.url, "--definition", definitionFile.path, "--cache", cache, "--quiet"],
                ["report", "--database-url", db.url, "--config", configurationFile.path, "--funnel", "android_otp"],
            ] {
                let run = try OnrampBinary.run(command + arguments)
                #expect(run.status == 2 && run.stdout.isEmpty, "\(command[0]) \(arguments): \(run.status) \(run.stdout)")
                #expect(run.stderr.contains(message), "\(command[0]) \(arguments): \(run.stderr)")
            }
        }
        try await db.drop()
    }
}
