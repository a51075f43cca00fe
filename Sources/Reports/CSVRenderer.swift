import Foundation
import Funnels

/// One row per funnel and step, for spreadsheets.
struct CSVRenderer {
    func render(_ reports: [FunnelReport]) -> String {
        // Regressions, then improvements, first; then each section after a blank line with its own header:
        // steps, the drop-off diagnostics' two, retention, instrumentation findings (when there are any).
        var out = "direction,funnel,kind,metric,step,baseline_label,baseline_value,baseline_persons,baseline_ci_low,baseline_ci_high,recent_label,recent_value,recent_persons,recent_ci_low,recent_ci_high,difference,p_value,q_value\n"
        let (regressions, improvements) = RegressionText.all(reports)
        for (direction, changes) in [("regression", regressions), ("improvement", improvements)] {
            for c in changes {
                var fields = [direction, c.funnel, c.kind.rawValue, c.metric.rawValue, c.step ?? ""]
                for side in [c.baseline, c.recent] {
                    fields += [side.label, number(side.value), "\(side.persons)", number(side.ci95?.lower), number(side.ci95?.upper)]
                }
                fields += [number(c.difference), number(c.pValue), number(c.qValue)]
                out += fields.map(quote).joined(separator: ",") + "\n"
            }
        }
        out += "\nfunnel,app,step_index,step_name,optional,persons,conversion_from_previous,conversion_from_start,drop_off,in_progress,median_seconds_from_previous,completion_rate,completion_ci_low,completion_ci_high,median_seconds_to_complete,p90_seconds_to_complete\n"
        for r in reports {
            for s in r.steps {
                let fields: [String] = [
                    r.funnel, r.app, "\(s.index)", s.name, s.isOptional ? "true" : "false", "\(s.persons)",
                    number(s.conversionFromPrevious.value), number(s.conversionFromStart.value), "\(s.dropOff)",
                    "\(s.inProgress)", number(s.medianSecondsFromPrevious), number(r.completionRate.value),
                    number(r.completionRate.ci95?.lower), number(r.completionRate.ci95?.upper),
                    number(r.timeToComplete.medianSeconds), number(r.timeToComplete.p90Seconds),
                ]
                out += fields.map(quote).joined(separator: ",") + "\n"
            }
        }
        let diagnosed = reports.compactMap { r in r.diagnostics.map { (r, $0) } }
        if !diagnosed.isEmpty { out += diagnostics(diagnosed) }
        let retained = reports.compactMap { r in r.retention.map { (r, $0) } }
        if !retained.isEmpty {
            out += "\nfunnel,cohort_day,day,outcome,eligible,retained,pending,rate,ci_low,ci_high,difference,p_value\n"
            for (r, retention) in retained {
                // The whole range (cohort_day empty), then each cohort day.
                for (cohort, days) in [("", retention.days)] + retention.cohorts.map({ ($0.day, $0.days) }) {
                    for day in days {
                        for (outcome, side) in [("completers", day.completers), ("non_completers", day.nonCompleters)] {
                            let fields = [r.funnel, cohort, "\(day.day)", outcome, "\(side.eligible)", "\(side.retained)", "\(side.pending)",
                                          number(side.rate.value), number(side.rate.ci95?.lower), number(side.rate.ci95?.upper),
                                          number(day.difference), number(day.pValue)]
                            out += fields.map(quote).joined(separator: ",") + "\n"
                        }
                    }
                }
            }
        }
        let findings = InstrumentationText.all(reports)
        if !findings.isEmpty {
            out += "\nfunnel,instrumentation,step,events,path,platform,baseline,recent,baseline_events,recent_events,recent_starters,baseline_type,recent_type\n"
            for f in findings {
                let fields = [f.funnel, f.kind.rawValue, f.step, f.labels.joined(separator: " | "), f.path ?? "", f.platform ?? "", f.baseline,
                              f.recent, "\(f.baselineEvents)", "\(f.recentEvents)", "\(f.recentStarters)", f.baselineType ?? "", f.recentType ?? ""]
                out += fields.map(quote).joined(separator: ",") + "\n"
            }
        }
        return out
    }

    /// The drop-off diagnostics' two sections: per step, and the drivers.
    private func diagnostics(_ diagnosed: [(FunnelReport, DropOffDiagnostics)]) -> String {
        var out = "\nfunnel,step_index,step_name,median_seconds_from_previous,p90_seconds_from_previous,dropped,median_lingering_seconds,p90_lingering_seconds,next_event,next_event_persons,next_event_share\n"
        for (r, d) in diagnosed {
            for step in d.steps {
                let head = [r.funnel, "\(step.index)", step.name, number(step.secondsFromPrevious?.median), number(step.secondsFromPrevious?.p90),
                            "\(step.dropped)", number(step.lingeringSeconds.median), number(step.lingeringSeconds.p90)]
                let next = step.nextEvents.isEmpty ? [["", "", ""]] : step.nextEvents.map { [$0.label, "\($0.persons)", number($0.share)] }
                for event in next { out += (head + event).map(quote).joined(separator: ",") + "\n" }
            }
        }
        out += "\nfunnel,from_index,to_index,kind,dimension,value,persons,converted,dropped,without_converted,without_dropped,odds_ratio,ci_low,ci_high,p_value,q_value\n"
        for (r, d) in diagnosed {
            for driver in d.drivers {
                let fields = [r.funnel, "\(driver.from)", "\(driver.to)", driver.kind.rawValue, driver.dimension ?? "", driver.value,
                              "\(driver.persons)", "\(driver.converted)", "\(driver.dropped)", "\(driver.table.c)", "\(driver.table.d)",
                              number(driver.oddsRatio), number(driver.ci95.lower), number(driver.ci95.upper), number(driver.pValue),
                              number(driver.qValue)]
                out += fields.map(quote).joined(separator: ",") + "\n"
            }
        }
        return out
    }

    private func number(_ value: Double?) -> String {
        guard let value, value.isFinite else { return "" }
        return "\(value)"
    }

    private func quote(_ field: String) -> String { Formatting.csvField(field) }
}
