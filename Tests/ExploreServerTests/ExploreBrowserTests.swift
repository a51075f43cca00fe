import Foundation
import LocalPostgres
import TestSupport
import Testing

/// The explorer in a real browser: headless Chromium driven by Selenium
/// through chromedriver (scripts/lib/explore_browser.py) builds a funnel by
/// choosing, typing and clicking in the page's controls, and what the page
/// draws equals `onramp funnel --format json` for the same funnel; a bad
/// filter shows the server's error on the page; a shared link's query that
/// waits shows its progress and is cancelled from the page.
@Suite("the explorer in a real browser", .serialized)
struct ExploreBrowserTests {
    /// The venv `scripts/test` makes (`$ONRAMP_TOOLS/selenium`, default ~/.cache/onramp/selenium).
    static var python: String? {
        let environment = ProcessInfo.processInfo.environment
        let tools = environment["ONRAMP_TOOLS"].flatMap { $0.isEmpty ? nil : $0 }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache/onramp").path
        let python = "\(tools)/selenium/bin/python"
        let ready = FileManager.default.isExecutableFile(atPath: python) && FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver")
        return ready ? python : nil
    }

    static var driverScript: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/lib/explore_browser.py").path
    }

    /// Runs the driver script; its JSON line.
    static func drive(_ python: String, _ arguments: [String]) async throws -> [String: Any] {
        let scratch = FileManager.default.temporaryDirectory
        let output = scratch.appendingPathComponent("explore-browser-\(UUID().uuidString).out")
        defer { try? FileManager.default.removeItem(at: output) }
        let child = try ChildProcess.start([python, driverScript] + arguments, outputPath: output.path, ownGroup: true)
        let deadline = ContinuousClock.now + .seconds(240)
        while try !child.hasExited() {
            if ContinuousClock.now > deadline { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        child.stopGroup()  // chromedriver and Chromium go with it
        let exit = try child.wait()
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        let line = text.split(separator: "\n").last { $0.hasPrefix("{") }.map(String.init) ?? ""
        guard exit.status == 0, let json = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            Issue.record("the browser driver failed (\(exit.statusDescription)):\n\(text.suffix(3000))")
            return [:]
        }
        return json
    }

    static func number(_ value: Any?) -> Double? {
        if let text = value as? String { return Double(text) }
        return (value as? NSNumber)?.doubleValue
    }

    @Test("typed and clicked in the page, a funnel draws the numbers onramp funnel gives; a bad filter shows its error; a waiting query is cancelled",
          .timeLimit(.minutes(8)))
    func buildCompareCancel() async throws {
        let python = try #require(
            Self.python,
            "selenium or chromedriver is missing: scripts/test installs them (apt-get install chromium-driver; a venv with selenium) — this test does not skip")
        let harness = try await ExplorerHarness.make()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("explore-browser-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let scenario = scratch.appendingPathComponent("scenario.json")
        try #"""
            {"app": "yoked", "window": "1h", "breakdown": "context.os.name",
             "steps": [{"label": "onboarding_started"}, {"label": "phone_entered", "where": "context.os.name=Android"}, {"label": "otp_verified"}, {"label": "profile_created"}]}
            """#.write(to: scenario, atomically: true, encoding: .utf8)
        let screenshot = ProcessInfo.processInfo.environment["ONRAMP_EXPLORE_SCREENSHOT"] ?? scratch.appendingPathComponent("explore.png").path

        try await harness.withExplorer { base in
            let page = try await Self.drive(python, ["build", "\(base)/?token=\(ExplorerHarness.token)", scenario.path, screenshot])
            #expect(page["state"] as? String == "done", "\(page)")

            // The engine, asked the same funnel from the terminal.
            let engine = try OnrampBinary.run([
                "funnel", "--database-url", harness.db.url, "--app", "yoked", "--step", "onboarding_started",
                "--step", "phone_entered where context.os.name=Android", "--step", "otp_verified", "--step", "profile_created",
                "--window", "1h", "--breakdown", "context.os.name", "--format", "json", "--quiet",
                "--cache", scratch.appendingPathComponent("cli-cache").path,
            ])
            #expect(engine.status == 0, "\(engine.stderr)")
            let answer = try #require(try JSONSerialization.jsonObject(with: Data(engine.stdout.utf8)) as? [String: Any])
            let steps = try #require(answer["steps"] as? [[String: Any]])
            let drawn = try #require(page["steps"] as? [[String: Any]], "\(page)")
            #expect(drawn.count == steps.count)
            for (shown, step) in zip(drawn, steps) {
                #expect(shown["name"] as? String == step["name"] as? String)
                for field in ["persons", "drop_off", "in_progress"] {
                    #expect(Self.number(shown[field]) == Self.number(step[field]), "\(field) of \(step["name"] ?? ""): \(shown) vs \(step)")
                }
                #expect(abs((Self.number(shown["conversion_from_start"]) ?? -1) - (Self.number(step["conversion_from_start"]) ?? -2)) < 1e-12)
            }
            #expect(try #require(steps.first)["persons"] as? Int ?? 0 > 50, "a funnel with persons in it")
            let completion = try #require(answer["completion_rate"] as? [String: Any])
            let interval = try #require(completion["ci95"] as? [Double])
            let drawnCompletion = try #require(page["completion"] as? [String: Any])
            #expect(abs((Self.number(drawnCompletion["value"]) ?? -1) - (Self.number(completion["value"]) ?? -2)) < 1e-12)
            #expect(abs((Self.number(drawnCompletion["lo"]) ?? -1) - interval[0]) < 1e-12)
            #expect(abs((Self.number(drawnCompletion["hi"]) ?? -1) - interval[1]) < 1e-12)
            // The breakdown comparison: every value's p-value as the engine computed it.
            let comparisons = try #require((answer["comparisons"] as? [String: Any])?["context.os.name"] as? [[String: Any]])
            let rows = try #require(page["breakdown"] as? [[String: Any]])
            #expect(!comparisons.isEmpty)
            for comparison in comparisons {
                let row = rows.first { $0["value"] as? String == comparison["value"] as? String }
                #expect(abs((Self.number(row?["p_value"]) ?? -1) - (Self.number(comparison["p_value"]) ?? -2)) < 1e-15, "\(comparison) vs \(rows)")
            }
            #expect((page["console"] as? [Any])?.isEmpty == true, "console errors: \(page["console"] ?? "")")
            let yaml = page["yaml"] as? String ?? ""
            #expect(yaml.contains("app: yoked") && yaml.contains("window: 1h") && yaml.contains("event: phone_entered"), "\(yaml)")
            #expect(FileManager.default.fileExists(atPath: screenshot))
            // A bad filter: the server's message, naming the field, on the page.
            let error = page["bad_filter_error"] as? String ?? ""
            #expect(error.contains("'plan' is not a path under properties., context. or traits."), "\(page)")
            #expect(!(page["bad_filter_result_text"] as? String ?? "").isEmpty, "the page kept what it drew")

            // The shared link, opened while another query holds the app's store: it waits, says so, and is cancelled.
            let link = try #require(page["link"] as? String)
            let locks = try Self.holdStoreLocks(harness.cache)
            defer { for descriptor in locks { close(descriptor) } }
            #expect(!locks.isEmpty)
            // A new browser: the link with the token, as an operator would hand it out (the sign-in keeps the query in its fragment).
            let fragment = try #require(link.firstIndex(of: "#").map { String(link[$0...]) }, "\(link)")
            let cancelled = try await Self.drive(python, ["cancel", "\(base)/?token=\(ExplorerHarness.token)\(fragment)"])
            #expect(cancelled["state"] as? String == "cancelled", "\(cancelled)")
            #expect((cancelled["progress"] as? String)?.isEmpty == false, "\(cancelled)")
        }
        try await harness.close()
    }

    @Test("with an audience picked, a drop-off clicked in the page lists the persons, draws where they went and downloads the CSV that onramp funnel prints",
          .timeLimit(.minutes(8)))
    func persons() async throws {
        let python = try #require(Self.python, "selenium or chromedriver is missing: scripts/test installs them — this test does not skip")
        let harness = try await ExplorerHarness.make(seed: 11)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("explore-persons-\(UUID().uuidString)")
        let downloads = scratch.appendingPathComponent("downloads")
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        // An audience kept by the job: those who entered their phone on Android. The page counts the others.
        let configuration = scratch.appendingPathComponent("onramp.yaml")
        let defaults = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/Funnels/Resources/default-funnels.yaml")
        try (try String(contentsOf: defaults, encoding: .utf8) + """

            audiences:
              - {name: android, app: yoked, did: {event: phone_entered, where: {context.os.name: Android}}}

            """).write(to: configuration, atomically: true, encoding: .utf8)
        let kept = try OnrampBinary.run(["audiences", "run", "--database-url", harness.db.url, "--config", configuration.path])
        #expect(kept.status == 0, "\(kept.stderr)")
        let scenario = scratch.appendingPathComponent("scenario.json")
        try #"""
            {"app": "yoked", "window": "1h", "breakdown": "context.os.name", "audience": "out:android",
             "steps": [{"label": "onboarding_started"}, {"label": "phone_entered"}, {"label": "otp_verified"}, {"label": "profile_created"}]}
            """#.write(to: scenario, atomically: true, encoding: .utf8)
        let screenshot = ProcessInfo.processInfo.environment["ONRAMP_PERSONS_SCREENSHOT"] ?? scratch.appendingPathComponent("persons.png").path
        let terminal = [
            "funnel", "--database-url", harness.analystURL, "--app", "yoked", "--step", "onboarding_started", "--step", "phone_entered",
            "--step", "otp_verified", "--step", "profile_created", "--window", "1h", "--breakdown", "context.os.name", "--quiet",
            "--cache", scratch.appendingPathComponent("cache").path, "--not-audience", "android",
        ]
        let csv = try OnrampBinary.run(terminal + ["--persons", "dropped:2", "--format", "csv"])
        let everyone = try OnrampBinary.run(terminal.dropLast(2) + ["--persons", "dropped:2", "--format", "csv"])
        #expect(everyone.stdout.split(separator: "\n").count > csv.stdout.split(separator: "\n").count, "the audience leaves some out")
        let tree = try OnrampBinary.run(terminal + ["--paths-after", "2", "--format", "json"])
        #expect(csv.status == 0 && tree.status == 0, "\(csv.stderr) \(tree.stderr)")
        let rows = csv.stdout.split(separator: "\n").map { CSVLine.fields(String($0)) }
        #expect(rows.count > 2, "some dropped at step 2: \(csv.stdout)")

        try await harness.withExplorer { base in
            let page = try await Self.drive(python, ["persons", "\(base)/?token=\(ExplorerHarness.token)", scenario.path, "2", downloads.path, screenshot])
            #expect(page["state"] as? String == "done" && page["cell"] as? String == "dropped:2", "\(page)")
            #expect(page["total"] as? Int == rows.count - 1)
            #expect(page["listed"] as? [String] == rows.dropFirst().prefix(100).map { $0[0] })
            #expect((page["command"] as? String)?.contains("--persons dropped:2") == true)
            #expect((page["command"] as? String)?.contains("--not-audience 'android'") == true, "\(page["command"] ?? "")")
            // The CSV the page downloaded is the terminal's, but for the seconds since the last step.
            let file = try #require((page["downloads"] as? [String])?.first, "\(page)")
            let downloaded = try String(contentsOf: downloads.appendingPathComponent(file), encoding: .utf8)
            func withoutSeconds(_ rows: [[String]]) -> [[String]] { rows.map { row in row.enumerated().filter { $0.offset != 7 }.map(\.element) } }
            #expect(withoutSeconds(downloaded.split(separator: "\n").map { CSVLine.fields(String($0)) }) == withoutSeconds(rows))
            // The tree drawn is the terminal's: level 1's labels and persons.
            let json = try #require(try JSONSerialization.jsonObject(with: Data(tree.stdout.utf8)) as? [String: Any])
            let level1 = (json["next"] as? [[String: Any]] ?? []).map { "\($0["label"] ?? "") \($0["persons"] ?? "")" }
            let drawn = (page["paths"] as? [[String: Any]] ?? []).filter { $0["depth"] as? Int == 1 }.map { "\($0["label"] ?? "") \($0["persons"] ?? "")" }
            #expect(drawn == level1 && !level1.isEmpty, "\(drawn) vs \(level1)")
            #expect((page["events"] as? [String])?.isEmpty == false, "a person's events: \(page)")
            #expect((page["console"] as? [Any])?.isEmpty == true, "console errors: \(page["console"] ?? "")")
            #expect(FileManager.default.fileExists(atPath: screenshot))
        }
        try await harness.close()
    }

    /// Takes every app store's lock under `cache`, as a long query would.
    static func holdStoreLocks(_ cache: URL) throws -> [Int32] {
        var descriptors: [Int32] = []
        let enumerator = FileManager.default.enumerator(at: cache, includingPropertiesForKeys: nil)
        while let url = enumerator?.nextObject() as? URL {
            guard url.lastPathComponent == "lock" else { continue }
            let descriptor = open(url.path, O_RDWR)
            if descriptor >= 0, flock(descriptor, LOCK_EX) == 0 { descriptors.append(descriptor) }
        }
        return descriptors
    }
}
