import Foundation
public import Funnels

/// One funnel for the HTML dashboard: its report and, for the distribution
/// chart, every completer's time to complete (`PersonOutcome.secondsToComplete`);
/// with `paths`, where those who dropped at a step went next.
public struct DashboardFunnel: Sendable {
    public var report: FunnelReport
    public var secondsToComplete: [Double]
    public var paths: DashboardPaths?

    public init(report: FunnelReport, secondsToComplete: [Double], paths: DashboardPaths? = nil) {
        self.report = report
        self.secondsToComplete = secondsToComplete
        self.paths = paths
    }
}

/// The paths after a step (`--paths-after`), drawn on the funnel's page.
public struct DashboardPaths: Sendable {
    public var tree: PathNode
    public var about: PathTreeText.About

    public init(tree: PathNode, about: PathTreeText.About) {
        self.tree = tree
        self.about = about
    }
}

/// The self-contained HTML dashboard of `onramp report --out DIR` (docs/analysts.md, "The HTML dashboard"):
/// `index.html` with one card per funnel and one page per funnel, inline CSS
/// and SVG only — no scripts, no fonts, no images, no links but to sibling
/// pages, and a Content-Security-Policy that forbids loading anything, so it
/// opens from disk with no network.
///
/// Key figures sit in elements with stable `id`s (funnel page) or `data-`
/// attributes (index cards, table rows) so tests can read them from the DOM:
/// `#completion-rate` (text "61.0%", `data-value` the exact rate),
/// `#completion-ci`, `#started`, `#completed`, `#in-progress`, `#excluded`,
/// `#median-time`, `#p90-time`, `#targets-met`, `#targets-missed`;
/// `tr[data-step-index][data-step-persons]`, `tr[data-cohort-day]`,
/// `table[data-dimension] tr[data-value]`, `li[data-target][data-met]`,
/// `article.card[data-funnel][data-page]` with `[data-field=...]` inside.
public struct HTMLDashboard: Sendable {
    public var range: ReportRange

    public init(range: ReportRange) {
        self.range = range
    }

    /// File name → HTML: `index.html` and one page per funnel, named by
    /// `pageNames(for:)`.
    public func render(_ funnels: [DashboardFunnel]) -> [String: String] {
        let names = Self.pageNames(for: funnels.map(\.report.funnel))
        let navigation = zip(funnels, names).map { (name: $0.report.funnel, page: $1) }
        var files = ["index.html": index(funnels, pages: names)]
        for (funnel, page) in zip(funnels, names) {
            files[page] = self.page(funnel, current: page, navigation: navigation)
        }
        return files
    }

    /// Sanitised, unique page names in the order of `funnels`: lower-case ASCII
    /// letters, digits, `-` and `_` (anything else becomes `-`), at most 80
    /// characters, never `index.html`; repeats get `-2`, `-3`, ….
    public static func pageNames(for funnels: [String]) -> [String] {
        var used: Set<String> = ["index"]
        return funnels.map { name in
            var stem = ""
            for scalar in name.lowercased().unicodeScalars {
                let keep = ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) || scalar == "_" || scalar == "-"
                if keep { stem.unicodeScalars.append(scalar) } else if !stem.hasSuffix("-") { stem += "-" }
            }
            stem = String(stem.trimmingCharacters(in: CharacterSet(charactersIn: "-")).prefix(80))
            if stem.isEmpty { stem = "funnel" }
            var candidate = stem
            var suffix = 2
            while used.contains(candidate) {
                candidate = "\(stem)-\(suffix)"
                suffix += 1
            }
            used.insert(candidate)
            return candidate + ".html"
        }
    }

    // MARK: Index

    private func index(_ funnels: [DashboardFunnel], pages: [String]) -> String {
        var body = "<header><h1>Onramp funnels</h1>\(meta(nil))</header><main>"
        if funnels.isEmpty { body += "<p class=\"muted\">No funnels in this report.</p>" }
        body += RegressionHTML.banner(funnels.map(\.report), pages: Dictionary(zip(funnels.map(\.report.funnel), pages)) { first, _ in first })
        body += "<div class=\"cards\">"
        for (funnel, page) in zip(funnels, pages) {
            let r = funnel.report
            let met = r.targets.count(where: \.met), missed = r.targets.count - met
            body += "<article class=\"card\" data-funnel=\"\(HTML.escape(r.funnel))\" data-page=\"\(HTML.escape(page))\">"
            body += "<h2><a href=\"\(HTML.escape(page))\">\(HTML.escape(r.funnel))</a></h2>"
            body += "<p class=\"muted\">app \(HTML.escape(r.app)) · window \(Formatting.window(r.windowSeconds))"
                + r.options.map { " · " + HTML.escape($0) }.joined() + "</p>"
            body += "<p class=\"big\"><span data-field=\"completion-rate\" data-value=\"\(raw(r.completionRate.value))\">\(Formatting.percent(r.completionRate.value))</span>"
                + " <span class=\"ci\" data-field=\"completion-ci\">\(Formatting.interval(r.completionRate))</span></p>"
            body += "<p class=\"muted\">completion rate, 95% CI</p>"
            body += "<dl class=\"figures\">"
                + "<div><dt>started</dt><dd data-field=\"started\">\(r.started)</dd></div>"
                + "<div><dt>completed</dt><dd data-field=\"completed\">\(r.completed)</dd></div>"
                + "<div><dt>in progress</dt><dd data-field=\"in-progress\">\(r.inProgress)</dd></div>"
                + "<div><dt>median time</dt><dd data-field=\"median-time\">\(Formatting.duration(r.timeToComplete.medianSeconds))</dd></div>"
                + "</dl>"
            body += SVGCharts.sparkline(r.cohorts)
            if r.targets.isEmpty {
                body += "<p class=\"muted\">no targets configured</p>"
            } else {
                body += "<p class=\"targets-summary\"><span class=\"badge \(met > 0 ? "met" : "none")\" data-field=\"targets-met\">\(met) met</span> "
                    + "<span class=\"badge \(missed > 0 ? "missed" : "none")\" data-field=\"targets-missed\">\(missed) missed</span></p>"
            }
            body += "<p><a class=\"more\" href=\"\(HTML.escape(page))\">Open the \(HTML.escape(r.funnel)) dashboard →</a></p>"
            body += "</article>"
        }
        body += "</div></main>"
        return document(title: "Onramp funnels", body)
    }

    // MARK: Funnel page

    private func page(_ funnel: DashboardFunnel, current: String, navigation: [(name: String, page: String)]) -> String {
        let r = funnel.report
        var body = "<nav><a href=\"index.html\">← All funnels</a>"
        for item in navigation {
            body += item.page == current
                ? " <span class=\"current\">\(HTML.escape(item.name))</span>"
                : " <a href=\"\(HTML.escape(item.page))\">\(HTML.escape(item.name))</a>"
        }
        body += "</nav>"
        body += "<header><h1 id=\"funnel-name\">\(HTML.escape(r.funnel))</h1>\(meta(r))</header><main>"
        body += RegressionHTML.banner([r], pages: nil)
        body += summary(r)
        body += targets(r)
        body += RegressionHTML.table(r)
        body += section("Funnel", SVGCharts.funnelBars(r.steps)
            + "<p class=\"legend\"><span class=\"swatch bar\"></span>reached the step <span class=\"swatch lost\"></span>lost since the previous step"
            + " <span class=\"swatch optional\"></span>optional step (share of persons reaching the next step)</p>")
        body += section("Completion by cohort day", SVGCharts.completionTrend(r.cohorts, target: completionTarget(r))
            + "<p class=\"legend\"><span class=\"swatch line\"></span>completion rate <span class=\"swatch band\"></span>95% confidence interval"
            + " <span class=\"swatch hatch\"></span>in progress: some windows still open, rate will still rise</p>")
        body += section("Time to complete", SVGCharts.histogram(funnel.secondsToComplete, median: r.timeToComplete.medianSeconds, p90: r.timeToComplete.p90Seconds)
            + "<p class=\"legend\">\(r.timeToComplete.completers) \(r.timeToComplete.completers == 1 ? "completer" : "completers") · median <strong>\(Formatting.duration(r.timeToComplete.medianSeconds))</strong>"
            + " · p90 <strong>\(Formatting.duration(r.timeToComplete.p90Seconds))</strong></p>")
        body += section("Steps", stepTable(r))
        body += section("Cohort days", cohortTable(r))
        for breakdown in r.breakdowns {
            body += section("By \(HTML.escape(breakdown.dimension))", breakdownTable(breakdown, in: r))
        }
        if let d = r.diagnostics { body += diagnostics(d) }
        if let paths = funnel.paths { body += PathTreeChart.section(paths.tree, about: paths.about) }
        if let retention = r.retention, !retention.days.isEmpty { body += self.retention(retention) }
        body += "</main>"
        return document(title: "\(r.funnel) — Onramp", body)
    }

    /// A page of its own for the paths after a step, as of the last night
    /// (`onramp report --paths-after K --format html`), where no report was counted.
    public func paths(_ paths: DashboardPaths) -> String {
        let body = "<header><h1 id=\"funnel-name\">\(HTML.escape(paths.about.funnel))</h1>"
            + "<p class=\"meta\">app \(HTML.escape(paths.about.app)) · every stored cohort day, as of the last run · generated \(HTML.escape(range.generatedAt))</p></header>"
            + "<main>" + PathTreeChart.section(paths.tree, about: paths.about) + "</main>"
        return document(title: "\(paths.about.funnel) — where they went — Onramp", body)
    }

    private func summary(_ r: FunnelReport) -> String {
        func tile(_ label: String, _ id: String, _ value: String, data: String? = nil, note: String = "") -> String {
            let attribute = data.map { " data-value=\"\($0)\"" } ?? ""
            return "<div class=\"tile\"><div class=\"tile-label\">\(label)</div><div class=\"tile-value\" id=\"\(id)\"\(attribute)>\(value)</div>\(note)</div>"
        }
        return "<section class=\"tiles\">"
            + tile("Completion rate", "completion-rate", Formatting.percent(r.completionRate.value), data: raw(r.completionRate.value),
                   note: "<div class=\"tile-note\">95% CI <span id=\"completion-ci\">\(Formatting.interval(r.completionRate))</span></div>")
            + tile("Started", "started", "\(r.started)")
            + tile("Completed", "completed", "\(r.completed)")
            + tile("In progress", "in-progress", "\(r.inProgress)")
            + tile("Excluded", "excluded", "\(r.excludedPersons)")
            + tile("Median time", "median-time", Formatting.duration(r.timeToComplete.medianSeconds), data: raw(r.timeToComplete.medianSeconds))
            + tile("p90 time", "p90-time", Formatting.duration(r.timeToComplete.p90Seconds), data: raw(r.timeToComplete.p90Seconds))
            + "</section>"
    }

    private func targets(_ r: FunnelReport) -> String {
        guard !r.targets.isEmpty else { return "" }
        let met = r.targets.count(where: \.met)
        var out = "<section class=\"targets\"><h2>Targets <span class=\"badge \(met > 0 ? "met" : "none")\" id=\"targets-met\">\(met) met</span> "
            + "<span class=\"badge \(met < r.targets.count ? "missed" : "none")\" id=\"targets-missed\">\(r.targets.count - met) missed</span></h2><ul>"
        for target in r.targets {
            out += "<li class=\"\(target.met ? "met" : "missed")\" data-target=\"\(HTML.escape(target.name))\" data-met=\"\(target.met)\">"
                + "<span class=\"badge \(target.met ? "met" : "missed")\">\(target.met ? "met" : "missed")</span> \(HTML.escape(Formatting.target(target)))</li>"
        }
        return out + "</ul></section>"
    }

    private func stepTable(_ r: FunnelReport) -> String {
        var out = "<table class=\"steps\"><thead><tr><th>#</th><th>step</th><th class=\"num\">persons</th><th class=\"num\">from previous</th>"
            + "<th class=\"num\">from start</th><th class=\"num\">drop-off</th><th class=\"num\">drop-off %</th><th class=\"num\">in progress</th>"
            + "<th class=\"num\">median from previous</th></tr></thead><tbody>"
        for s in r.steps {
            out += "<tr data-step-index=\"\(s.index)\" data-step-name=\"\(HTML.escape(s.name))\" data-step-persons=\"\(s.persons)\"\(s.isOptional ? " class=\"optional\"" : "")>"
                + "<td class=\"num\">\(s.index)</td><td>\(HTML.escape(s.name))\(s.isOptional ? " <span class=\"muted\">(optional)</span>" : "")</td>"
                + "<td class=\"num\" data-field=\"persons\">\(s.persons)</td>"
                + "<td class=\"num\" title=\"95% CI \(Formatting.interval(s.conversionFromPrevious))\">\(Formatting.percent(s.conversionFromPrevious.value))</td>"
                + "<td class=\"num\">\(s.isOptional ? "" : Formatting.percent(s.conversionFromStart.value))</td>"
                + "<td class=\"num\" data-field=\"drop-off\">\(s.isOptional ? "" : "\(s.dropOff)")</td>"
                + "<td class=\"num\">\(s.isOptional ? "" : Formatting.percent(s.dropOffRate.value))</td>"
                + "<td class=\"num\">\(s.isOptional ? "" : "\(s.inProgress)")</td>"
                + "<td class=\"num\">\(Formatting.duration(s.medianSecondsFromPrevious))</td></tr>"
        }
        return out + "</tbody></table>"
    }

    private func cohortTable(_ r: FunnelReport) -> String {
        guard !r.cohorts.isEmpty else { return "<p class=\"muted\">No cohort days in the report range.</p>" }
        var out = "<table class=\"cohorts\"><thead><tr><th>cohort day</th><th class=\"num\">started</th><th class=\"num\">completed</th>"
            + "<th class=\"num\">in progress</th><th class=\"num\">rate</th><th>95% CI</th><th></th><th>status</th></tr></thead><tbody>"
        for d in r.cohorts {
            out += "<tr data-cohort-day=\"\(HTML.escape(d.day))\" data-in-progress=\"\(d.inProgress)\"\(d.inProgress ? " class=\"in-progress\"" : "")>"
                + "<td>\(HTML.escape(d.day))</td><td class=\"num\">\(d.started)</td><td class=\"num\">\(d.completed)</td>"
                + "<td class=\"num\">\(d.inProgressPersons)</td><td class=\"num\">\(Formatting.percent(d.completionRate.value))</td>"
                + "<td>\(Formatting.interval(d.completionRate))</td><td>\(SVGCharts.rateBar(d.completionRate))</td>"
                + "<td>\(d.inProgress ? "<span class=\"badge progress\">in progress</span>" : "closed")</td></tr>"
        }
        return out + "</tbody></table>"
    }

    private func breakdownTable(_ breakdown: BreakdownReport, in r: FunnelReport) -> String {
        let comparisons = Comparisons.against(baselineOf: breakdown, in: r)
        let byValue = Dictionary(comparisons.map { ($0.a.value, $0) }, uniquingKeysWith: { first, _ in first })
        let baseline = comparisons.first?.b.value
            ?? breakdown.values.max(by: { ($0.started, $1.value) < ($1.started, $0.value) })?.value
        var out = "<table class=\"breakdown\" data-dimension=\"\(HTML.escape(breakdown.dimension))\"><thead><tr>"
            + "<th>\(HTML.escape(breakdown.dimension))</th><th class=\"num\">started</th><th class=\"num\">completed</th>"
            + "<th class=\"num\">in progress</th><th class=\"num\">rate</th><th>95% CI</th><th></th>"
            + "<th class=\"num\">vs baseline</th><th class=\"num\">p-value</th></tr></thead><tbody>"
        for v in breakdown.values {
            let isBaseline = v.value == baseline
            var difference = isBaseline ? "<span class=\"badge none\">baseline</span>" : "—"
            var pValue = ""
            var significant = false
            if let c = byValue[v.value] {
                difference = String(format: "%+.1f pts", c.difference * 100)
                pValue = String(format: "%.3g", c.pValue)
                significant = c.pValue < 0.05
            }
            out += "<tr data-value=\"\(HTML.escape(v.value))\"\(isBaseline ? " data-baseline=\"true\"" : "")\(significant ? " class=\"significant\"" : "")>"
                + "<td>\(HTML.escape(v.value))</td><td class=\"num\">\(v.started)</td><td class=\"num\">\(v.completed)</td><td class=\"num\">\(v.inProgress)</td>"
                + "<td class=\"num\" data-field=\"rate\">\(Formatting.percent(v.completionRate.value))</td><td>\(Formatting.interval(v.completionRate))</td>"
                + "<td>\(SVGCharts.rateBar(v.completionRate))</td>"
                + "<td class=\"num\" data-field=\"difference\">\(difference)</td><td class=\"num\" data-field=\"p-value\">\(pValue)</td></tr>"
        }
        out += "</tbody></table>"
        if let baseline {
            out += "<p class=\"legend\">Each value is compared with the most common one (\(HTML.escape(baseline))): difference in completion rate,"
                + " two-proportion z-test p-value; rows with p &lt; 0.05 are highlighted.</p>"
        }
        return out
    }

    // MARK: Why they drop off

    /// docs/funnels.md, "Why they drop off": the step-time chart, a "what they did instead" table per
    /// step, and the drivers chart with a table of the same drivers.
    /// `table.next-events[data-step-index] tr[data-label][data-persons]`,
    /// `table.drivers tr[data-transition][data-kind][data-value]`.
    private func diagnostics(_ d: DropOffDiagnostics) -> String {
        var out = section("Time at each step", SVGCharts.stepTimes(d)
            + "<p class=\"legend\"><span class=\"swatch bar\"></span>time from the previous step <span class=\"swatch lost\"></span>"
            + "how long those who dropped there lingered; bar to the median, whisker to the p90, log scale</p>")
        var tables = "<div class=\"next-events\">"
        for step in d.steps.dropLast() {
            tables += "<div><h3>\(step.index). \(HTML.escape(step.name)) — \(step.dropped) dropped</h3>"
            guard !step.nextEvents.isEmpty else {
                tables += "<p class=\"muted\">No one dropped here.</p></div>"
                continue
            }
            tables += "<table class=\"next-events\" data-step-index=\"\(step.index)\"><thead><tr><th>did next</th><th class=\"num\">persons</th>"
                + "<th class=\"num\">share</th></tr></thead><tbody>"
            for next in step.nextEvents.prefix(8) {
                tables += "<tr data-label=\"\(HTML.escape(next.label))\" data-persons=\"\(next.persons)\"><td>\(HTML.escape(next.label))</td>"
                    + "<td class=\"num\">\(next.persons)</td><td class=\"num\">\(Formatting.percent(next.share))</td></tr>"
            }
            if step.nextEvents.count > 8 {
                tables += "<tr><td class=\"muted\" colspan=\"3\">\(step.nextEvents.count - 8) more in report.json</td></tr>"
            }
            tables += "</tbody></table></div>"
        }
        out += section("What they did instead", tables + "</div><p class=\"legend\">The first event after the step they left at, within their"
            + " window, that was not the step again.</p>")
        let drivers = d.significantDrivers()
        var table = ""
        if !drivers.isEmpty {
            table = "<table class=\"drivers\"><thead><tr><th>transition</th><th>candidate</th><th class=\"num\">persons</th>"
                + "<th class=\"num\">converted</th><th>odds ratio [95% CI]</th><th class=\"num\">p</th><th class=\"num\">q</th></tr></thead><tbody>"
            for driver in drivers {
                table += "<tr data-transition=\"\(driver.from)-\(driver.to)\" data-kind=\"\(driver.kind.rawValue)\" data-value=\"\(HTML.escape(driver.value))\""
                    + " data-odds-ratio=\"\(driver.oddsRatio)\"><td>\(HTML.escape(DiagnosticsText.transition(driver, in: d)))</td>"
                    + "<td>\(HTML.escape(DiagnosticsText.candidate(driver)))</td><td class=\"num\">\(driver.persons)</td>"
                    + "<td class=\"num\">\(driver.converted)</td><td>\(DiagnosticsText.oddsRatio(driver))</td>"
                    + "<td class=\"num\">\(DiagnosticsText.pValue(driver.pValue))</td><td class=\"num\">\(DiagnosticsText.pValue(driver.qValue))</td></tr>"
            }
            table += "</tbody></table>"
        }
        out += section("Conversion drivers", SVGCharts.drivers(drivers, in: d) + table
            + "<p class=\"legend\">Breakdown values and events done on each transition, tested against converting (Fisher's exact test,"
            + " Benjamini–Hochberg q over every candidate of the funnel with at least \(d.minSupport) persons); q &lt; 0.05, most significant first.</p>")
        return out
    }

    /// Retention of completers against non-completers: the two curves, and
    /// the numbers with their difference and its p-value.
    private func retention(_ retention: RetentionReport) -> String {
        var table = "<table class=\"retention\"><thead><tr><th>day</th><th>completers</th><th>non-completers</th>"
            + "<th class=\"num\">difference</th><th class=\"num\">p</th></tr></thead><tbody>"
        for day in retention.days {
            table += "<tr data-day=\"\(day.day)\" data-pending=\"\(day.isPending)\"><td>\(RetentionText.day(day))</td>"
                + "<td>\(HTML.escape(RetentionText.side(day.completers)))</td><td>\(HTML.escape(RetentionText.side(day.nonCompleters)))</td>"
                + "<td class=\"num\">\(RetentionText.difference(day))</td><td class=\"num\">\(RetentionText.pValue(day))</td></tr>"
        }
        table += "</tbody></table>"
        return section("Retention: does finishing onboarding matter?", SVGCharts.retentionCurves(retention)
            + "<p class=\"legend\"><span class=\"swatch line\"></span>completers <span class=\"swatch line non-completers\"></span>non-completers"
            + " <span class=\"swatch band\"></span><span class=\"swatch band non-completers\"></span>95% confidence intervals"
            + " <span class=\"swatch hatch\"></span>pending: nobody's day has passed yet</p>" + table
            + "<p class=\"legend\">Share of persons who started the funnel, with closed windows and not excluded, active on day N after"
            + " their start; difference in points and its two-proportion z-test p-value.</p>")
    }

    // MARK: Pieces

    /// A completion-rate target to draw on the trend chart, if one is configured.
    private func completionTarget(_ r: FunnelReport) -> (threshold: Double, label: String)? {
        guard let target = r.targets.first(where: { $0.name.contains("completion") && (0...1).contains($0.threshold) }) else { return nil }
        let op: String
        switch target.bound {
        case .atLeast: op = "≥"
        case .atMost: op = "≤"
        }
        return (target.threshold, "target \(op) \(Formatting.percent(target.threshold, digits: 0))")
    }

    private func meta(_ r: FunnelReport?) -> String {
        var parts: [String] = []
        if let r {
            parts += ["app \(HTML.escape(r.app))", "window \(Formatting.window(r.windowSeconds))", "time zone \(HTML.escape(r.timeZone))"]
            parts += r.options.map(HTML.escape)
        }
        parts += [HTML.escape(range.label), "generated \(HTML.escape(range.generatedAt))"]
        return "<p class=\"meta\">\(parts.joined(separator: " · "))</p>"
    }

    private func section(_ title: String, _ content: String) -> String {
        "<section><h2>\(title)</h2>\(content)</section>"
    }

    /// An exact number for a `data-value` attribute ("" when absent).
    private func raw(_ value: Double?) -> String {
        value.map { String($0) } ?? ""
    }

    private func document(title: String, _ body: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
        <meta name="referrer" content="no-referrer">
        <title>\(HTML.escape(title))</title>
        <style>\(Self.stylesheet)</style>
        </head>
        <body>
        \(body)
        </body>
        </html>

        """
    }
}
