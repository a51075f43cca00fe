import Foundation
import Funnels
import Reports
import TestSupport
import Testing

/// The HTML dashboard: pure checks on the generated pages, then the same pages
/// loaded in headless Chromium (Debian's `chromium` package).
@Suite("HTML dashboard")
struct HTMLDashboardTests {
    static let hostile = "<script>alert(1)</script>"
    static let range = ReportRange(from: "2026-11-14", to: "2026-11-21", generatedAt: "2026-11-22T06:00:00Z")

    /// The 3-person report of the renderer tests, whose numbers are known by
    /// hand: completion 1 of 3 = 33.3 %, persons per step 3, 2, 1.
    static func small() throws -> DashboardFunnel {
        DashboardFunnel(report: try RenderersTests.report(), secondsToComplete: [600])
    }

    /// A hostile funnel: every user-controlled name is markup.
    static func hostileFunnel() throws -> DashboardFunnel {
        let configuration = try FunnelConfiguration.parse(
            yaml: """
                apps: [{name: shop}]
                funnels:
                  - name: "\(hostile)"
                    app: shop
                    breakdowns: ["properties.x\\"><b>"]
                    steps:
                      - {name: "\(hostile)", event: a}
                      - {name: "b\\"'&<i>", event: b}
                """, source: "hostile.yaml")
        let funnel = try #require(configuration.funnels.first)
        let t0: Int64 = 20_000 * 86_400_000_000
        let now = t0 + 3 * 86_400_000_000
        func e(_ name: String, _ seconds: Int64) -> FunnelEvent {
            FunnelEvent(messageId: UUID().uuidString, kind: .track, name: name, timestamp: t0 + seconds * 1_000_000,
                        attributes: ["properties.x\"><b>": "<img src=x onerror=alert(2)>"])
        }
        let outcomes = [
            FunnelEvaluator.evaluate(events: [e("a", 0), e("b", 30)], funnel: funnel, now: now),
            FunnelEvaluator.evaluate(events: [e("a", 10)], funnel: funnel, now: now),
        ]
        let report = FunnelReport(funnel: funnel, outcomes: outcomes, now: now, timeZone: TimeZone(identifier: "UTC") ?? .gmt)
        return DashboardFunnel(report: report, secondsToComplete: outcomes.compactMap(\.secondsToComplete))
    }

    /// A realistic funnel: 600 persons over 8 cohort days (the last ones still
    /// in progress), an optional step, two breakdowns and two targets.
    static func realistic() throws -> DashboardFunnel {
        let configuration = try FunnelConfiguration.parse(
            yaml: """
                apps: [{name: yoked}]
                funnels:
                  - name: yoked_onboarding
                    app: yoked
                    window: 24h
                    steps:
                      - {event: onboarding_started}
                      - {event: otp_verified}
                      - {event: tutorial_seen, optional: true}
                      - {event: profile_created}
                      - {event: onboarding_completed}
                    targets:
                      - {name: completion_rate, metric: completion_rate, threshold: 0.6}
                      - {name: median_time, metric: median_seconds_to_complete, max: 900}
                """, source: "yoked.yaml")
        let funnel = try #require(configuration.funnels.first)
        let day: Int64 = 86_400_000_000
        let t0: Int64 = 20_771 * day  // 2026-11-14
        let now = t0 + 7 * day + 18 * 3_600_000_000
        var random = SplitMix(seed: 42)
        var outcomes: [PersonOutcome] = []
        var counts = DropOffCounts()
        for person in 0..<600 {
            let os = random.unit() < 0.6 ? "iOS" : "Android"
            let version = random.unit() < 0.5 ? "2.3.0" : "2.4.0"
            let attributes = ["context.os.name": os, "context.app.version": version]
            var t = t0 + Int64(person % 8) * day + Int64(random.unit() * Double(day))
            var events = [FunnelEvent(messageId: "\(person)-s", kind: .track, name: "onboarding_started", timestamp: t, attributes: attributes)]
            let advance = os == "iOS" ? [0.92, 0.55, 0.85, 0.83] : [0.86, 0.4, 0.78, 0.76]
            for (index, name) in ["otp_verified", "tutorial_seen", "profile_created", "onboarding_completed"].enumerated() {
                let gap = 20 + pow(random.unit(), 3) * 3_000  // seconds, long-tailed
                if name == "tutorial_seen" {
                    if random.unit() < advance[index] {
                        events.append(FunnelEvent(messageId: "\(person)-t", kind: .track, name: name, timestamp: t + Int64(gap * 100_000), attributes: attributes))
                    }
                    continue
                }
                guard random.unit() < advance[index] else {
                    // Who leaves at the code on Android mostly saw it fail first.
                    if index == 0 && os == "Android" && random.unit() < 0.8 {
                        events.append(FunnelEvent(messageId: "\(person)-f", kind: .track, name: "otp_failed", timestamp: t + 30_000_000, attributes: attributes))
                    }
                    break
                }
                t += Int64(gap * 1_000_000)
                guard t <= now else { break }
                events.append(FunnelEvent(messageId: "\(person)-\(index + 1)", kind: .track, name: name, timestamp: t, attributes: attributes))
            }
            let outcome = FunnelEvaluator.evaluate(events: events, funnel: funnel, now: now)
            outcomes.append(outcome)
            counts.add(outcome, funnel: funnel, events: events)
        }
        var report = FunnelReport(funnel: funnel, outcomes: outcomes, now: now, timeZone: TimeZone(identifier: "UTC") ?? .gmt)
        report.diagnostics = DropOffDiagnostics(funnel: funnel, tally: FunnelTally(funnel: funnel, outcomes: outcomes, timeZone: .gmt), counts: counts)
        report.regressions = Self.plantedRegressions(funnel)
        report.retention = RenderersTests.retention(cohortDay: report.cohorts.first?.day ?? "2026-11-20")
        let included = outcomes.filter { !$0.excluded && $0.level > 0 }
        return DashboardFunnel(report: report, secondsToComplete: included.compactMap(\.secondsToComplete))
    }

    /// Version 2.4.0 converts 8 points worse into profile_created and better
    /// into otp_verified than 2.3.0: one regression, one improvement.
    static func plantedRegressions(_ funnel: Funnel) -> RegressionFindings {
        func sample(_ label: String, _ rates: [Double]) -> ComparisonSample {
            var reached = [3000]
            for rate in rates { reached.append(Int(Double(reached[reached.count - 1]) * rate)) }
            // The optional step (index 2) is reached by nobody the comparison tests.
            reached.insert(0, at: 2)
            return ComparisonSample(
                label: label, started: 3000, completed: reached[4], reached: reached,
                durations: (0..<reached[4]).map { Int64(300 + $0 % 60) * 1_000_000 })
        }
        var found = RegressionFindings()
        found.tested = Regressions.adjust(Regressions.compare(
            funnel: funnel, kind: .version, baseline: sample("2.3.0", [0.85, 0.92, 0.9]), recent: sample("2.4.0", [0.9, 0.84, 0.9])))
        (found.regressions, found.improvements) = Regressions.judge(found.tested, settings: funnel.alerts)
        return found
    }

    static func all() throws -> [DashboardFunnel] {
        // The realistic funnel carries drop-off diagnostics; the other two show pages without them.
        [try realistic(), try small(), try hostileFunnel()]
    }

    static func percent(_ value: Double?) -> String {
        value.map { String(format: "%.1f%%", $0 * 100) } ?? "—"
    }

    // MARK: Pure checks

    @Test("one page per funnel with sanitised, unique names, and an index linking them")
    func files() throws {
        let files = HTMLDashboard(range: Self.range).render(try Self.all())
        let pages = HTMLDashboard.pageNames(for: ["yoked_onboarding", "checkout, \"quoted\"", Self.hostile])
        #expect(pages == ["yoked_onboarding.html", "checkout-quoted.html", "script-alert-1-script.html"])
        #expect(Set(files.keys) == Set(["index.html"] + pages))
        #expect(HTMLDashboard.pageNames(for: ["a b", "a/b", "index", "", "../.."]) == ["a-b.html", "a-b-2.html", "index-2.html", "funnel.html", "funnel-2.html"])
        let index = try #require(files["index.html"])
        for page in pages { Self.expect(index, contains: "href=\"\(page)\"") }
    }

    @Test("self-contained: no network references, no scripts, links only to sibling pages")
    func selfContained() throws {
        let files = HTMLDashboard(range: Self.range).render(try Self.all())
        for (name, html) in files {
            Self.expect(html, lacks: "http://")
            Self.expect(html, lacks: "https://")
            Self.expect(html.lowercased(), lacks: "<script")
            Self.expect(html.replacingOccurrences(of: "url(#hatch)", with: "").replacingOccurrences(of: "url(#retention-hatch)", with: ""), lacks: "url(")
            Self.expect(html, contains: "Content-Security-Policy")
            for target in Self.attributeValues(in: html, named: ["href", "src", "action", "xlink:href"]) {
                #expect(target == "index.html" || (files[target] != nil && !target.contains("/")), "\(name) links to \(target)")
            }
        }
    }

    @Test("user-controlled names are escaped everywhere")
    func escaping() throws {
        let files = HTMLDashboard(range: Self.range).render([try Self.hostileFunnel()])
        let page = try #require(files["script-alert-1-script.html"])
        let index = try #require(files["index.html"])
        for html in [page, index] {
            Self.expect(html, lacks: Self.hostile)
            Self.expect(html, lacks: "<img")
            Self.expect(html, lacks: "<b>")
            Self.expect(html, contains: "&lt;script&gt;alert(1)&lt;/script&gt;")
        }
        Self.expect(page, contains: "data-step-name=\"b&quot;&#39;&amp;&lt;i&gt;\"")
        Self.expect(page, contains: "&lt;img src=x onerror=alert(2)&gt;")
        Self.expect(page, contains: "data-dimension=\"properties.x&quot;&gt;&lt;b&gt;\"")
    }

    @Test("the report's numbers are on the page, in stable places")
    func numbers() throws {
        let files = HTMLDashboard(range: Self.range).render([try Self.small()])
        let page = try #require(files["checkout-quoted.html"])
        Self.expect(page, contains: "id=\"completion-rate\" data-value=\"\(1.0 / 3.0)\">33.3%<")
        Self.expect(page, contains: "<span id=\"completion-ci\">[6.1%–79.2%]</span>")
        Self.expect(page, contains: "id=\"started\">3<")
        Self.expect(page, contains: "id=\"completed\">1<")
        Self.expect(page, contains: "id=\"in-progress\">1<")
        Self.expect(page, contains: "id=\"median-time\" data-value=\"600.0\">10m 0s<")
        #expect(Self.attributeValues(in: page, named: ["data-step-persons"]) == ["3", "2", "1"])
        Self.expect(page, contains: "data-target=\"completion_rate\" data-met=\"false\"")
        Self.expect(page, contains: "id=\"targets-missed\">1 missed<")
        Self.expect(page, contains: "data-cohort-day=\"2024-10-05\" data-in-progress=\"true\"")
        Self.expect(page, contains: "in progress</text>")  // the trend chart marks the open day
        Self.expect(page, contains: "data-baseline=\"true\"")  // iOS, the larger group
        Self.expect(page, contains: "data-value=\"Android\"")
        Self.expect(page, contains: "median 10m 0s</text>")
        let index = try #require(files["index.html"])
        Self.expect(index, contains: "data-field=\"completion-rate\" data-value=\"\(1.0 / 3.0)\">33.3%<")
        Self.expect(index, contains: "data-field=\"started\">3<")
    }

    @Test("breakdown comparisons match the report's, charts are present for a realistic funnel")
    func realisticPage() throws {
        let funnel = try Self.realistic()
        let report = funnel.report
        let page = try #require(HTMLDashboard(range: Self.range).render([funnel])["yoked_onboarding.html"])
        Self.expect(page, contains: ">\(Self.percent(report.completionRate.value))<")
        #expect(Self.attributeValues(in: page, named: ["data-step-persons"]) == report.steps.map { "\($0.persons)" })
        let comparison = try #require(report.compare(breakdown: "context.os.name", a: "Android", b: "iOS"))
        Self.expect(page, contains: String(format: "%+.1f pts", comparison.difference * 100))
        Self.expect(page, contains: String(format: "%.3g", comparison.pValue))
        Self.expect(page, contains: "class=\"chart funnel\"")
        Self.expect(page, contains: "class=\"chart trend-chart\"")
        Self.expect(page, contains: "class=\"chart histogram\"")
        Self.expect(page, contains: "class=\"band\"")
        Self.expect(page, contains: "class=\"point open\"")
        #expect(report.cohorts.contains { $0.inProgress } && report.cohorts.contains { !$0.inProgress })
    }

    @Test("paths after a step: an icicle whose boxes are as tall as their persons, labels escaped, on the funnel's page or one of its own")
    func pathsAfter() throws {
        let configuration = try FunnelConfiguration.parse(
            yaml: "apps: [{name: shop}]\nfunnels:\n  - {name: checkout, app: shop, steps: [{name: a, event: a}, {name: b, event: b}]}",
            source: "paths.yaml")
        let funnel = try #require(configuration.funnels.first)
        let tree = PathNode(label: "", persons: 40, children: [
            PathNode(label: Self.hostile, persons: 30, children: [PathNode(label: "(no further events)", persons: 30, children: [])]),
            PathNode(label: "(no further events)", persons: 10, children: []),
        ])
        let paths = DashboardPaths(tree: tree, about: PathTreeText.About(funnel, paths: PathsAnalysis(step: 1, funnel: funnel)))
        var drawn = try Self.small()
        drawn.paths = paths
        let page = try #require(HTMLDashboard(range: Self.range).render([drawn])["checkout-quoted.html"])
        let own = HTMLDashboard(range: Self.range).paths(paths)
        for html in [page, own] {
            Self.expect(html, contains: "<section id=\"paths-after\" data-step=\"1\" data-dropped=\"40\">")
            Self.expect(html, lacks: Self.hostile)
            Self.expect(html.lowercased(), lacks: "<script")
            // 320 high: 30 of 40 persons take 240 (a pixel apart from the next box), 10 take 80.
            Self.expect(html, contains: "data-persons=\"30\"><title>&lt;script&gt;alert(1)&lt;/script&gt;: 30 persons (75.0% of those who dropped)</title>"
                + "<rect x=\"225\" y=\"0\" width=\"223\" height=\"239\"/>")
            Self.expect(html, contains: "<g class=\"path-node none\" data-depth=\"1\" data-path=\"(no further events)\" data-persons=\"10\">")
            Self.expect(html, contains: "<rect x=\"225\" y=\"240\" width=\"223\" height=\"79\"/>")
        }
        let none = HTMLDashboard(range: Self.range).paths(DashboardPaths(tree: PathNode(label: "", persons: 0, children: []), about: paths.about))
        Self.expect(none, contains: "No one dropped at step 1")
    }

    @Test("a long tail goes into one overflow bar; no data gives a message, not an empty chart")
    func histogramEdges() throws {
        var funnel = try Self.small()
        funnel.secondsToComplete = [60, 120, 600, 600, 100_000]
        let page = try #require(HTMLDashboard(range: Self.range).render([funnel])["checkout-quoted.html"])
        Self.expect(page, contains: "class=\"hist overflow\"")
        Self.expect(page, contains: "over 20m 0s (up to 1d 3h): 1 completers")
        funnel.secondsToComplete = []
        let empty = try #require(HTMLDashboard(range: Self.range).render([funnel])["checkout-quoted.html"])
        Self.expect(empty, contains: "No one has completed this funnel yet.")
        Self.expect(empty, lacks: "class=\"chart histogram\"")
    }

    // MARK: Chromium

    @Test("renders in headless Chromium without console errors and shows the report's numbers",
          .timeLimit(.minutes(5)))
    func chromium() async throws {
        let browser = try #require(
            Chromium.executable(),
            "chromium is not installed: run `apt-get install chromium` (scripts/test installs it) — this test does not skip")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("onramp-html-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        // First prove that console detection works on this Chromium: a page
        // with a script error, a console.error and a blocked network load
        // must be caught, or a silent pass below would mean nothing.
        let canary = directory.appendingPathComponent("canary.html")
        try Data(Chromium.canaryPage.utf8).write(to: canary)
        let canaryRun = try await Chromium.dumpDOM(browser, canary, profile: directory.appendingPathComponent("profile"))
        #expect(canaryRun.consoleLines.contains { $0.contains("Uncaught ReferenceError") }, "console detection is broken: \(canaryRun.stderr.suffix(2000))")
        #expect(canaryRun.consoleLines.contains { $0.contains("onramp-canary-error") })
        #expect(canaryRun.consoleLines.contains { $0.contains("Content Security Policy") })

        let funnels = try Self.all()
        let files = HTMLDashboard(range: Self.range).render(funnels)
        // ONRAMP_HTML_KEEP=DIR also leaves the pages there, for scripts/screenshot DIR.
        let keep = ProcessInfo.processInfo.environment["ONRAMP_HTML_KEEP"].map { URL(fileURLWithPath: $0) }
        if let keep { try FileManager.default.createDirectory(at: keep, withIntermediateDirectories: true) }
        for (name, html) in files {
            try Data(html.utf8).write(to: directory.appendingPathComponent(name))
            if let keep { try Data(html.utf8).write(to: keep.appendingPathComponent(name)) }
        }
        let pages = HTMLDashboard.pageNames(for: funnels.map(\.report.funnel))
        for (funnel, page) in zip(funnels, pages) {
            let run = try await Chromium.dumpDOM(browser, directory.appendingPathComponent(page), profile: directory.appendingPathComponent("profile"))
            #expect(run.status == 0, "\(page): chromium exited \(run.status): \(run.stderr.suffix(2000))")
            #expect(run.consoleLines.isEmpty, "\(page): console messages: \(run.consoleLines)")
            let dom = run.dom
            let report = funnel.report
            #expect(Self.elementText(in: dom, id: "completion-rate") == Self.percent(report.completionRate.value), "\(page)")
            #expect(Self.elementText(in: dom, id: "started") == "\(report.started)")
            #expect(Self.elementText(in: dom, id: "completed") == "\(report.completed)")
            #expect(Self.attributeValues(in: dom, named: ["data-step-persons"]) == report.steps.map { "\($0.persons)" }, "\(page)")
            Self.expect(dom, contains: "<svg")
            // No element came from data: the only scripts are none at all.
            Self.expect(dom.lowercased(), lacks: "<script")
            Self.expect(dom, lacks: "<img")
            // The regression banner and, when there are any, the compared values.
            Self.expect(dom, contains: "id=\"regressions\" class=\"alerts \(report.regressions.regressions.isEmpty ? "quiet" : "alarm")\" data-regressions=\"\(report.regressions.regressions.count)\"")
            #expect(Self.attributeValues(in: dom, named: ["data-step"]) == (report.regressions.regressions + report.regressions.improvements).map { $0.step ?? "" }, "\(page)")
            guard let diagnostics = report.diagnostics else { continue }
            #expect(report.regressions.regressions.map(\.step) == ["profile_created"] && report.regressions.improvements.map(\.step) == ["otp_verified"])
            Self.expect(dom, contains: "<section class=\"compared\"><h2>Compared</h2>")
            Self.expect(dom, contains: "<tr data-direction=\"regression\">")
            // Why they drop off: both charts, a next-events table per step, the significant drivers in order.
            Self.expect(dom, contains: "class=\"chart step-times\"")
            Self.expect(dom, contains: "class=\"chart drivers\"")
            for step in diagnostics.steps.dropLast() where !step.nextEvents.isEmpty {
                let table = try #require(dom.range(of: "data-step-index=\"\(step.index)\"><thead>"), "next events of step \(step.index)")
                let rest = dom[table.upperBound...]
                let rows = rest[..<(rest.range(of: "</table>")?.lowerBound ?? rest.endIndex)]
                #expect(Self.attributeValues(in: String(rows), named: ["data-label"]) == step.nextEvents.prefix(8).map(\.label), "\(page) step \(step.index)")
            }
            let shown = diagnostics.significantDrivers()
            #expect(!shown.isEmpty, "\(page): the realistic funnel has drivers")
            #expect(Self.attributeValues(in: dom, named: ["data-transition"]) == shown.map { "\($0.from)-\($0.to)" }, "\(page)")
            #expect(Self.attributeValues(in: dom, named: ["data-odds-ratio"]) == shown.map { "\($0.oddsRatio)" }, "\(page)")
            // Retention: both curves' points where someone is eligible, the pending day marked, not drawn.
            Self.expect(dom, contains: "class=\"chart retention-chart\"")
            #expect(Self.attributeValues(in: dom, named: ["data-series"]) == ["completers", "non-completers"], "\(page)")
            #expect(Self.attributeValues(in: dom, named: ["data-rate"]).suffix(2) == ["0.75", "0.25"], "\(page)")
            Self.expect(dom, contains: "class=\"pending-zone\" data-day=\"30\"")
            Self.expect(dom, contains: "<tr data-day=\"30\" data-pending=\"true\"><td>D30</td><td>pending (40)</td>")
        }

        let indexRun = try await Chromium.dumpDOM(browser, directory.appendingPathComponent("index.html"), profile: directory.appendingPathComponent("profile"))
        #expect(indexRun.consoleLines.isEmpty, "index.html: console messages: \(indexRun.consoleLines)")
        Self.expect(indexRun.dom, contains: "data-field=\"completion-rate\" data-value=\"\(1.0 / 3.0)\">33.3%<")
        Self.expect(indexRun.dom, contains: "&lt;script&gt;alert(1)&lt;/script&gt;")
        // The index's banner: the one regression, linked to its funnel's page.
        Self.expect(indexRun.dom, contains: "class=\"alerts alarm\" data-regressions=\"1\" data-improvements=\"1\"")
        Self.expect(indexRun.dom, contains: "data-step=\"profile_created\"><a href=\"yoked_onboarding.html\">yoked_onboarding: conversion to profile_created")
        Self.expect(indexRun.dom.lowercased(), lacks: "<script")
    }

    // MARK: Helpers

    /// `contains` without printing a whole page on failure.
    static func expect(_ html: String, contains needle: String, sourceLocation: SourceLocation = #_sourceLocation) {
        if !html.contains(needle) { Issue.record("missing: \(needle)", sourceLocation: sourceLocation) }
    }

    static func expect(_ html: String, lacks needle: String, sourceLocation: SourceLocation = #_sourceLocation) {
        if html.contains(needle) { Issue.record("unexpected: \(needle)", sourceLocation: sourceLocation) }
    }

    /// Values of the named attributes (double-quoted, as the renderer and
    /// Chromium's serializer write them), in document order.
    static func attributeValues(in html: String, named names: Set<String>) -> [String] {
        var values: [String] = []
        var rest = html[...]
        while let equals = rest.range(of: "=\"") {
            let before = rest[..<equals.lowerBound]
            let name = before.reversed().prefix { !$0.isWhitespace && $0 != "<" && $0 != "\"" }
            let after = rest[equals.upperBound...]
            guard let close = after.firstIndex(of: "\"") else { break }
            if names.contains(String(name.reversed())) { values.append(String(after[..<close])) }
            rest = after[after.index(after: close)...]
        }
        return values
    }

    /// The text of the element with this id (no nested markup expected).
    static func elementText(in html: String, id: String) -> String? {
        guard let start = html.range(of: "id=\"\(id)\""),
              let open = html[start.upperBound...].firstIndex(of: ">"),
              let close = html[open...].firstIndex(of: "<") else { return nil }
        return String(html[html.index(after: open)..<close])
    }
}

/// Runs Debian's `chromium` headless. Console messages (script errors,
/// `console.*`, blocked loads reported by the Content-Security-Policy) are
/// logged to stderr by `--enable-logging=stderr --v=0` as lines containing
/// `:CONSOLE`; since the dashboard has no scripts, any such line is a failure.
extension DropOffCounts {
    /// Adds one person the way the nightly job counts them (docs/funnels.md, "Why they drop off"), for reports built in memory.
    mutating func add(_ outcome: PersonOutcome, funnel: Funnel, events: [FunnelEvent]) {
        guard let facts = DropOffFacts.of(outcome, in: funnel, shape: DropOffFacts.Shape(funnel), events: events) else { return }
        add(outcome, facts: facts, required: funnel.requiredStepIndices)
    }
}
