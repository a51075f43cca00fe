import Foundation
import Funnels

/// The default terminal report: aligned per-step table with drop-off bars,
/// completion with its interval, time to complete, targets, cohorts and breakdowns.
struct TableRenderer {
    var colors: Bool

    func render(_ reports: [FunnelReport], range: ReportRange) -> String {
        RegressionText.block(reports, bullet: "  ", heading: { $0 }) + "\n" + reports.map { render($0, range: range) }.joined(separator: "\n")
    }

    private func render(_ r: FunnelReport, range: ReportRange) -> String {
        var out = "\(r.funnel) (app \(r.app)) — window \(Formatting.window(r.windowSeconds)), \(range.label), time zone \(r.timeZone)\n"
        if !r.options.isEmpty { out += "  " + r.options.joined(separator: "; ") + "\n" }
        if let frozen = r.frozen { out += "  " + frozen.sentence + " (docs/lifecycle.md)\n" }
        let nameWidth = max(24, (r.steps.map(\.name.count).max() ?? 0) + 2)
        out += "  " + Formatting.pad("#", 3) + Formatting.pad("step", nameWidth) + Formatting.pad(r.aggregateBy == .group ? "groups" : "persons", 9, right: true)
            + Formatting.pad("from prev", 11, right: true) + Formatting.pad("from start", 12, right: true)
            + Formatting.pad("drop-off", 10, right: true) + Formatting.pad("in prog.", 10, right: true)
            + Formatting.pad("median Δ", 11, right: true) + "  reached\n"
        let top = max(1, r.steps.first?.persons ?? 1)
        for step in r.steps {
            let width = 24
            let filled = Int((Double(step.persons) / Double(top) * Double(width)).rounded())
            let bar = String(repeating: "█", count: min(width, filled)) + String(repeating: "·", count: max(0, width - filled))
            let name = step.isOptional ? "(\(step.name))" : step.name
            out += "  " + Formatting.pad("\(step.index)", 3) + Formatting.pad(name, nameWidth)
                + Formatting.pad("\(step.persons)", 9, right: true)
                + Formatting.pad(Formatting.percent(step.conversionFromPrevious.value), 11, right: true)
                + Formatting.pad(step.isOptional ? "" : Formatting.percent(step.conversionFromStart.value), 12, right: true)
                + Formatting.pad(step.isOptional ? "" : "\(step.dropOff)", 10, right: true)
                + Formatting.pad(step.isOptional ? "" : "\(step.inProgress)", 10, right: true)
                + Formatting.pad(Formatting.duration(step.medianSecondsFromPrevious), 11, right: true) + "  \(bar)\n"
        }
        out += "  completion \(Formatting.percent(r.completionRate.value)) \(Formatting.interval(r.completionRate)) "
            + "(\(r.completed) of \(r.started)); in progress \(r.inProgress); excluded \(r.excludedPersons)\n"
        out += "  time to complete: median \(Formatting.duration(r.timeToComplete.medianSeconds)), "
            + "p90 \(Formatting.duration(r.timeToComplete.p90Seconds)) over \(r.timeToComplete.completers) completers\n"
        for target in r.targets { out += "  target \(Formatting.target(target))\n" }
        if !r.cohorts.isEmpty {
            out += "  cohorts:   day          started  completed  rate\n"
            for day in r.cohorts {
                out += "             \(day.day)  " + Formatting.pad("\(day.started)", 7, right: true)
                    + Formatting.pad("\(day.completed)", 11, right: true)
                    + Formatting.pad(Formatting.percent(day.completionRate.value), 8, right: true)
                    + (day.inProgress ? "  in progress" : "") + "\n"
            }
        }
        for breakdown in r.breakdowns {
            out += "  by \(breakdown.dimension):\n"
            for value in breakdown.values {
                out += "    " + Formatting.pad(value.value, 22) + Formatting.pad("\(value.started)", 8, right: true)
                    + Formatting.pad(Formatting.percent(value.completionRate.value), 9, right: true) + " "
                    + Formatting.interval(value.completionRate) + "\n"
            }
            for comparison in Comparisons.against(baselineOf: breakdown, in: r) {
                out += "    \(comparison.a.value) vs \(comparison.b.value): "
                    + String(format: "%+.1f pts, p = %.3g", comparison.difference * 100, comparison.pValue) + "\n"
            }
        }
        if let d = r.diagnostics { out += diagnostics(d) }
        if let retention = r.retention, !retention.days.isEmpty { out += self.retention(retention) }
        return out
    }

    /// Retention of completers against non-completers, per retention day.
    private func retention(_ retention: RetentionReport) -> String {
        var out = "  retention (active on day N after the start; 95% CI):\n"
        // Wide enough for `100.0% [99.1%–100.0%] of 12345, 1234 pending`, then a space.
        out += "    " + Formatting.pad("day", 6) + Formatting.pad("completers", 46) + " " + Formatting.pad("non-completers", 46)
            + Formatting.pad("difference", 12, right: true) + Formatting.pad("p", 10, right: true) + "\n"
        for day in retention.days {
            out += "    " + Formatting.pad(RetentionText.day(day), 6) + Formatting.pad(RetentionText.side(day.completers), 46) + " "
                + Formatting.pad(RetentionText.side(day.nonCompleters), 46)
                + Formatting.pad(RetentionText.difference(day), 12, right: true) + Formatting.pad(RetentionText.pValue(day), 10, right: true)
                + "\n"
        }
        return out
    }

    /// Why they drop off: per step the time from the previous step, those who
    /// dropped, how long they lingered and what they did next; then the
    /// significant drivers.
    private func diagnostics(_ d: DropOffDiagnostics) -> String {
        let nameWidth = max(24, (d.steps.map(\.name.count).max() ?? 0) + 2)
        var out = "  why they drop off (median / p90):\n"
        out += "    " + Formatting.pad("step", nameWidth) + Formatting.pad("from previous", 18) + Formatting.pad("dropped", 9, right: true)
            + "  " + Formatting.pad("lingered", 18) + "did next\n"
        for step in d.steps {
            let last = step.index == d.steps.last?.index
            out += "    " + Formatting.pad(step.name, nameWidth) + Formatting.pad(DiagnosticsText.spread(step.secondsFromPrevious), 18)
                + Formatting.pad(last ? "" : "\(step.dropped)", 9, right: true) + "  "
                + Formatting.pad(last ? "" : DiagnosticsText.spread(step.lingeringSeconds), 18)
                + (last ? "" : DiagnosticsText.nextEvents(step)) + "\n"
        }
        let drivers = d.significantDrivers()
        out += drivers.isEmpty
            ? "  drivers: none with q < 0.05 (candidates need \(d.minSupport) persons)\n"
            : "  drivers (q < 0.05, most significant first; odds ratio of converting with 95% CI):\n"
        for driver in drivers {
            out += "    " + Formatting.pad(DiagnosticsText.transition(driver, in: d), 40) + " "
                + Formatting.pad(DiagnosticsText.candidate(driver), 34) + " OR " + Formatting.pad(DiagnosticsText.oddsRatio(driver), 22)
                + " q \(DiagnosticsText.pValue(driver.qValue))  (\(driver.persons) persons)\n"
        }
        return out
    }
}

/// Each breakdown value (a) compared with the most common one (b, the baseline):
/// `difference` is a − b in completion rate.
enum Comparisons {
    static func against(baselineOf breakdown: BreakdownReport, in report: FunnelReport) -> [BreakdownComparison] {
        guard let baseline = breakdown.values.max(by: { ($0.started, $1.value) < ($1.started, $0.value) }) else { return [] }
        return breakdown.values.filter { $0.value != baseline.value }.compactMap {
            report.compare(breakdown: breakdown.dimension, a: $0.value, b: baseline.value)
        }
    }
}
