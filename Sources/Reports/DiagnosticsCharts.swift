import Foundation
import Funnels

/// The drop-off diagnostics' charts: time at each step and the drivers'
/// odds ratios with their intervals, both on log scales (durations run from
/// seconds to a day, odds ratios from a tenth to ten and beyond).
extension SVGCharts {
    /// Per required step: the median time from the previous step (bar) to its
    /// p90 (whisker), and below it the lingering of those who dropped there.
    static func stepTimes(_ d: DropOffDiagnostics) -> String {
        let rows = d.steps.filter { ($0.secondsFromPrevious?.persons ?? 0) > 0 || $0.lingeringSeconds.persons > 0 }
        guard !rows.isEmpty else { return empty(width: 900, height: 80, "No step times in the report range.") }
        let width = 900.0, labelWidth = 250.0, plotWidth = 560.0, rowHeight = 46.0, top = 10.0
        let values = rows.flatMap { [$0.secondsFromPrevious?.p90, $0.lingeringSeconds.p90] }.compactMap { $0 }
        let highest = max(60, values.max() ?? 60)
        let lowLog = 0.0, highLog = log10(highest * 1.2)
        func x(_ seconds: Double) -> Double {
            labelWidth + (log10(max(1, seconds)) - lowLog) / (highLog - lowLog) * plotWidth
        }
        var body = ""
        var y = top
        for step in rows {
            body += "<text x=\"0\" y=\"\(f(y + 17))\" class=\"label\">\(HTML.escape("\(step.index). " + HTML.truncate(step.name, to: 30)))</text>"
            let bars: [(spread: DropOffDiagnostics.Spread?, kind: String, title: String, className: String, offset: Double)] = [
                (step.secondsFromPrevious, "gap", "from previous step", "bar", 4),
                (step.lingeringSeconds, "lingering", "lingered before leaving", "lost", 22),
            ]
            for (spread, kind, title, className, offset) in bars {
                guard let spread, spread.persons > 0, let median = spread.median, let p90 = spread.p90 else { continue }
                body += "<g class=\"step-time\" data-step-index=\"\(step.index)\" data-kind=\"\(kind)\">"
                    + "<title>\(HTML.escape(step.name)) — \(title): median \(Formatting.duration(median)), p90 \(Formatting.duration(p90)) over \(spread.persons) persons</title>"
                    + "<rect x=\"\(f(labelWidth))\" y=\"\(f(y + offset))\" width=\"\(f(max(1, x(median) - labelWidth)))\" height=\"14\" class=\"\(className)\"/>"
                    + "<line x1=\"\(f(x(median)))\" x2=\"\(f(x(p90)))\" y1=\"\(f(y + offset + 7))\" y2=\"\(f(y + offset + 7))\" class=\"whisker\"/>"
                    + "<line x1=\"\(f(x(p90)))\" x2=\"\(f(x(p90)))\" y1=\"\(f(y + offset + 2))\" y2=\"\(f(y + offset + 12))\" class=\"tick\"/></g>"
            }
            y += rowHeight
        }
        for (seconds, label) in [(1.0, "1s"), (10, "10s"), (60, "1m"), (600, "10m"), (3600, "1h"), (21_600, "6h"), (86_400, "1d")]
        where seconds <= highest * 1.2 {
            body += "<line x1=\"\(f(x(seconds)))\" x2=\"\(f(x(seconds)))\" y1=\"\(f(top))\" y2=\"\(f(y))\" class=\"grid\"/>"
                + "<text x=\"\(f(x(seconds)))\" y=\"\(f(y + 16))\" class=\"axis\" text-anchor=\"middle\">\(label)</text>"
        }
        return svg(width: width, height: y + 24, label: "Time at each step", class: "step-times", body)
    }

    /// A forest plot of `drivers`: each candidate's odds ratio of converting
    /// (point) and 95 % interval (line), left of 1 going with dropping off.
    static func drivers(_ drivers: [DropOffDiagnostics.Driver], in d: DropOffDiagnostics) -> String {
        guard !drivers.isEmpty else {
            return empty(width: 900, height: 60, DiagnosticsText.noDrivers(d))
        }
        let width = 900.0, labelWidth = 420.0, plotWidth = 420.0, rowHeight = 24.0, top = 8.0
        let bounds = drivers.flatMap { [$0.ci95.lower, $0.ci95.upper] }.filter { $0.isFinite && $0 > 0 }
        let lowLog = min(-1, floor(log10(bounds.min() ?? 0.1))), highLog = max(1, ceil(log10(bounds.max() ?? 10)))
        func x(_ ratio: Double) -> Double {
            let value = min(max(log10(max(ratio, 1e-300)), lowLog), highLog)
            return labelWidth + (value - lowLog) / (highLog - lowLog) * plotWidth
        }
        var body = "<line x1=\"\(f(x(1)))\" x2=\"\(f(x(1)))\" y1=\"\(f(top))\" y2=\"\(f(top + rowHeight * Double(drivers.count)))\" class=\"baseline\"/>"
        for (row, driver) in drivers.enumerated() {
            let y = top + rowHeight * Double(row) + rowHeight / 2
            let label = "\(DiagnosticsText.transition(driver, in: d)): \(DiagnosticsText.candidate(driver))"
            let className = driver.oddsRatio < 1 ? "negative" : "positive"
            body += "<g class=\"driver \(className)\"><title>\(HTML.escape(label)) — odds ratio \(DiagnosticsText.oddsRatio(driver)), "
                + "p \(DiagnosticsText.pValue(driver.pValue)), q \(DiagnosticsText.pValue(driver.qValue)), \(driver.persons) persons</title>"
                + "<text x=\"0\" y=\"\(f(y + 4))\" class=\"label\">\(HTML.escape(HTML.truncate(label, to: 58)))</text>"
                + "<line x1=\"\(f(x(driver.ci95.lower)))\" x2=\"\(f(x(driver.ci95.upper)))\" y1=\"\(f(y))\" y2=\"\(f(y))\" class=\"ci\"/>"
                + "<circle cx=\"\(f(x(driver.oddsRatio)))\" cy=\"\(f(y))\" r=\"4.5\" class=\"point\"/></g>"
        }
        let bottom = top + rowHeight * Double(drivers.count)
        for exponent in stride(from: lowLog, through: highLog, by: 1) {
            let ratio = pow(10, exponent)
            body += "<text x=\"\(f(x(ratio)))\" y=\"\(f(bottom + 16))\" class=\"axis\" text-anchor=\"middle\">\(DiagnosticsText.number(ratio))</text>"
        }
        body += "<text x=\"\(f(labelWidth))\" y=\"\(f(bottom + 32))\" class=\"axis-title\">← goes with dropping off</text>"
            + "<text x=\"\(f(labelWidth + plotWidth))\" y=\"\(f(bottom + 32))\" class=\"axis-title\" text-anchor=\"end\">goes with converting →</text>"
        return svg(width: width, height: bottom + 40, label: "Conversion drivers: odds ratios with 95% intervals", class: "drivers", body)
    }
}
