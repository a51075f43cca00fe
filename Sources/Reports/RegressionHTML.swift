import Foundation
import Funnels

/// The dashboard's regression parts: a banner at the top of the index and of
/// a funnel's page, and on the page a table of what was compared, each side
/// with its interval. Elements carry `data-` attributes tests read:
/// `section#regressions[data-regressions]`, `li[data-direction][data-kind][data-metric][data-step]`.
enum RegressionHTML {
    /// The banner: the regressions in red, or a quiet line when there are
    /// none; improvements listed beneath. `pages` links each line to its
    /// funnel's page (the index), nil on a funnel's own page.
    static func banner(_ reports: [FunnelReport], pages: [String: String]?) -> String {
        let (regressions, improvements) = RegressionText.all(reports)
        var out = "<section id=\"regressions\" class=\"alerts \(regressions.isEmpty ? "quiet" : "alarm")\" data-regressions=\"\(regressions.count)\""
            + " data-improvements=\"\(improvements.count)\">"
        if regressions.isEmpty {
            out += "<h2>No regressions</h2><p class=\"muted\">on cohort days whose windows have all closed, against the days before them and the previous app version</p>"
        } else {
            out += "<h2>\(regressions.count) \(regressions.count == 1 ? "regression" : "regressions")</h2>" + list(regressions, direction: "regression", pages: pages)
        }
        if !improvements.isEmpty {
            out += "<h3>\(improvements.count) \(improvements.count == 1 ? "improvement" : "improvements")</h3>" + list(improvements, direction: "improvement", pages: pages)
        }
        return out + InstrumentationText.html(reports) + "</section>"
    }

    private static func list(_ changes: [MetricChange], direction: String, pages: [String: String]?) -> String {
        "<ul>" + changes.map { c in
            let text = HTML.escape(RegressionText.line(c))
            let linked = pages?[c.funnel].map { "<a href=\"\(HTML.escape($0))\">\(text)</a>" } ?? text
            return "<li data-direction=\"\(direction)\" data-funnel=\"\(HTML.escape(c.funnel))\" data-kind=\"\(c.kind.rawValue)\""
                + " data-metric=\"\(c.metric.rawValue)\" data-step=\"\(HTML.escape(c.step ?? ""))\">\(linked)</li>"
        }.joined() + "</ul>"
    }

    /// Every regression and improvement of one funnel: both sides' values
    /// with their intervals and persons, the difference and q.
    static func table(_ r: FunnelReport) -> String {
        let found = r.regressions
        guard !found.regressions.isEmpty || !found.improvements.isEmpty else { return "" }
        var out = "<section class=\"compared\"><h2>Compared</h2><table><thead><tr><th></th><th>metric</th><th>compared</th>"
            + "<th>before</th><th>after</th><th>difference</th><th>q</th></tr></thead><tbody>"
        for (direction, changes) in [("regression", found.regressions), ("improvement", found.improvements)] {
            for c in changes {
                func side(_ s: MetricChange.Side) -> String {
                    let interval = s.ci95.map { " <span class=\"ci\">[\(Formatting.percent($0.lower))–\(Formatting.percent($0.upper))]</span>" } ?? ""
                    return "\(HTML.escape(RegressionText.value(s, of: c)))\(interval)<br><span class=\"muted\">\(HTML.escape(s.label)), \(s.persons) persons</span>"
                }
                out += "<tr data-direction=\"\(direction)\"><td><span class=\"badge \(direction == "regression" ? "missed" : "met")\">\(direction)</span></td>"
                    + "<td>\(HTML.escape(RegressionText.metric(c)))</td><td>\(c.kind == .version ? "version" : "days")</td>"
                    + "<td>\(side(c.baseline))</td><td>\(side(c.recent))</td><td>\(HTML.escape(RegressionText.difference(c)))</td>"
                    + "<td>\(DiagnosticsText.pValue(c.qValue))</td></tr>"
            }
        }
        return out + "</tbody></table><p class=\"legend\">Two-proportion z-test for rates, Mann–Whitney U for the median time;"
            + " q: Benjamini–Hochberg over the funnel's tests. Rates with their 95% Wilson interval.</p></section>"
    }
}
