import Foundation
import Funnels

/// One row per funnel and step, for spreadsheets.
struct CSVRenderer {
    func render(_ reports: [FunnelReport]) -> String {
        var out = "funnel,app,step_index,step_name,optional,persons,conversion_from_previous,conversion_from_start,drop_off,in_progress,median_seconds_from_previous,completion_rate,completion_ci_low,completion_ci_high,median_seconds_to_complete,p90_seconds_to_complete\n"
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
        return out
    }

    private func number(_ value: Double?) -> String {
        guard let value, value.isFinite else { return "" }
        return "\(value)"
    }

    /// RFC 4180 quoting when a field needs it.
    private func quote(_ field: String) -> String {
        guard field.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return field }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
