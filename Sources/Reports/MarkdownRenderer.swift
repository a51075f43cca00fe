import Funnels

/// GitHub-flavoured markdown, for pasting into a ticket or a wiki.
struct MarkdownRenderer {
    func render(_ reports: [FunnelReport], range: ReportRange) -> String {
        RegressionText.block(reports, bullet: "- ", heading: { "## \($0)\n" }) + "\n" + reports.map { render($0, range: range) }.joined(separator: "\n")
    }

    private func render(_ r: FunnelReport, range: ReportRange) -> String {
        var out = "## \(r.funnel)\n\napp `\(r.app)`, window \(Formatting.window(r.windowSeconds)), \(range.label), time zone \(r.timeZone)"
            + r.options.map { ", " + $0 }.joined() + "\n\n"
        out += "| # | step | \(r.aggregateBy == .group ? "groups" : "persons") | from previous | from start | drop-off | in progress | median from previous |\n"
        out += "|---:|---|---:|---:|---:|---:|---:|---:|\n"
        for s in r.steps {
            out += "| \(s.index) | \(s.isOptional ? "_(\(s.name))_" : s.name) | \(s.persons) | "
                + "\(Formatting.percent(s.conversionFromPrevious.value)) | \(s.isOptional ? "" : Formatting.percent(s.conversionFromStart.value)) | "
                + "\(s.isOptional ? "" : "\(s.dropOff)") | \(s.isOptional ? "" : "\(s.inProgress)") | \(Formatting.duration(s.medianSecondsFromPrevious)) |\n"
        }
        out += "\n**Completion** \(Formatting.percent(r.completionRate.value)) \(Formatting.interval(r.completionRate)) "
            + "(\(r.completed) of \(r.started)), in progress \(r.inProgress), excluded \(r.excludedPersons). "
            + "**Time to complete** median \(Formatting.duration(r.timeToComplete.medianSeconds)), p90 \(Formatting.duration(r.timeToComplete.p90Seconds)).\n"
        if !r.targets.isEmpty {
            out += "\n" + r.targets.map { "- \(Formatting.target($0))" }.joined(separator: "\n") + "\n"
        }
        if !r.cohorts.isEmpty {
            out += "\n| cohort day | started | completed | rate | status |\n|---|---:|---:|---:|---|\n"
            for d in r.cohorts {
                out += "| \(d.day) | \(d.started) | \(d.completed) | \(Formatting.percent(d.completionRate.value)) | \(d.inProgress ? "in progress" : "closed") |\n"
            }
        }
        for b in r.breakdowns {
            out += "\n| \(b.dimension) | started | completed | rate | 95% CI |\n|---|---:|---:|---:|---|\n"
            for v in b.values {
                out += "| \(v.value) | \(v.started) | \(v.completed) | \(Formatting.percent(v.completionRate.value)) | \(Formatting.interval(v.completionRate)) |\n"
            }
        }
        if let d = r.diagnostics { out += diagnostics(d) }
        if let retention = r.retention, !retention.days.isEmpty {
            out += "\n### Retention of completers and non-completers\n\n"
            out += "| day | completers | non-completers | difference | p |\n|---|---|---|---:|---:|\n"
            for day in retention.days {
                out += "| \(RetentionText.day(day)) | \(RetentionText.side(day.completers)) | \(RetentionText.side(day.nonCompleters)) | "
                    + "\(RetentionText.difference(day)) | \(RetentionText.pValue(day)) |\n"
            }
        }
        return out
    }

    private func diagnostics(_ d: DropOffDiagnostics) -> String {
        var out = "\n### Why they drop off\n\n"
        out += "| step | from previous (median / p90) | dropped | lingered (median / p90) | did next |\n|---|---|---:|---|---|\n"
        for step in d.steps {
            let last = step.index == d.steps.last?.index
            out += "| \(step.name) | \(DiagnosticsText.spread(step.secondsFromPrevious)) | \(last ? "" : "\(step.dropped)") | "
                + "\(last ? "" : DiagnosticsText.spread(step.lingeringSeconds)) | \(last ? "" : DiagnosticsText.nextEvents(step)) |\n"
        }
        let drivers = d.significantDrivers()
        guard !drivers.isEmpty else {
            return out + "\n" + DiagnosticsText.noDrivers(d) + "\n"
        }
        out += "\n| transition | candidate | persons | converted | odds ratio [95% CI] | p | q |\n|---|---|---:|---:|---|---:|---:|\n"
        for driver in drivers {
            out += "| \(DiagnosticsText.transition(driver, in: d)) | \(DiagnosticsText.candidate(driver)) | \(driver.persons) | "
                + "\(driver.converted) | \(DiagnosticsText.oddsRatio(driver)) | \(DiagnosticsText.pValue(driver.pValue)) | "
                + "\(DiagnosticsText.pValue(driver.qValue)) |\n"
        }
        return out
    }
}
