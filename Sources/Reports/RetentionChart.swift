import Foundation
import Funnels

/// Retention's chart: the share of completers and of non-completers active on
/// each retention day, two curves with their 95 % Wilson bands. The days sit
/// at even steps (D1, D7, D30 would crowd at the left on a day scale); a day
/// nobody is eligible for yet is marked pending, not drawn as 0 %.
extension SVGCharts {
    static func retentionCurves(_ retention: RetentionReport) -> String {
        let days = retention.days
        guard days.contains(where: { $0.completers.eligible + $0.nonCompleters.eligible + $0.completers.pending + $0.nonCompleters.pending > 0 })
        else { return empty(width: 900, height: 80, "No one to follow in the report range.") }
        let width = 900.0, height = 300.0, left = 56.0, right = 16.0, top = 30.0, bottom = 44.0
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        let slot = plotWidth / Double(days.count)
        func x(_ i: Int) -> Double { left + (Double(i) + 0.5) * slot }
        func y(_ rate: Double) -> Double { top + (1 - min(1, max(0, rate))) * plotHeight }

        var body = "<defs><pattern id=\"retention-hatch\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
            + "<rect width=\"8\" height=\"8\" class=\"hatch-bg\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"8\" class=\"hatch-line\"/></pattern></defs>"
        for (index, day) in days.enumerated() where day.isPending {
            body += "<rect x=\"\(f(left + Double(index) * slot))\" y=\"\(f(top))\" width=\"\(f(slot))\" height=\"\(f(plotHeight))\""
                + " fill=\"url(#retention-hatch)\" class=\"pending-zone\" data-day=\"\(day.day)\"/>"
            body += "<text x=\"\(f(x(index)))\" y=\"\(f(top - 8))\" class=\"zone-label\" text-anchor=\"middle\">pending</text>"
        }
        for tick in stride(from: 0.0, through: 1.0, by: 0.25) {
            body += "<line x1=\"\(f(left))\" x2=\"\(f(width - right))\" y1=\"\(f(y(tick)))\" y2=\"\(f(y(tick)))\" class=\"grid\"/>"
            body += "<text x=\"\(f(left - 8))\" y=\"\(f(y(tick) + 4))\" class=\"axis\" text-anchor=\"end\">\(Int(tick * 100))%</text>"
        }
        let series: [(name: String, label: String, side: (RetentionDay) -> RetentionSide)] = [
            ("completers", "completers", \.completers), ("non-completers", "non-completers", \.nonCompleters),
        ]
        for (name, label, side) in series {
            let points = days.indices.compactMap { index -> (Int, Rate)? in
                let rate = side(days[index]).rate
                return rate.value == nil ? nil : (index, rate)
            }
            let bounds = points.compactMap { index, rate in rate.ci95.map { (index, $0) } }
            if bounds.count > 1 {
                let upper = bounds.map { "\(f(x($0.0))),\(f(y($0.1.upper)))" }
                let lower = bounds.reversed().map { "\(f(x($0.0))),\(f(y($0.1.lower)))" }
                body += "<polygon points=\"\((upper + lower).joined(separator: " "))\" class=\"band \(name)\">"
                    + "<title>\(label): 95% confidence interval</title></polygon>"
            }
            for (index, ci) in bounds {
                body += "<line x1=\"\(f(x(index)))\" x2=\"\(f(x(index)))\" y1=\"\(f(y(ci.upper)))\" y2=\"\(f(y(ci.lower)))\" class=\"whisker \(name)\"/>"
            }
            if points.count > 1 {
                let path = points.map { "\(f(x($0.0))),\(f(y($0.1.value ?? 0)))" }.joined(separator: " ")
                body += "<polyline points=\"\(path)\" class=\"curve \(name)\" fill=\"none\"/>"
            }
            for (index, rate) in points {
                let s = side(days[index])
                body += "<circle cx=\"\(f(x(index)))\" cy=\"\(f(y(rate.value ?? 0)))\" r=\"4.5\" class=\"point \(name)\""
                    + " data-series=\"\(name)\" data-day=\"\(days[index].day)\" data-rate=\"\(rate.value.map { String($0) } ?? "")\">"
                    + "<title>\(label), D\(days[index].day): \(Formatting.percent(rate.value)) \(Formatting.interval(rate)), "
                    + "\(s.retained) of \(s.eligible)\(s.pending > 0 ? ", \(s.pending) pending" : "")</title></circle>"
            }
        }
        for (index, day) in days.enumerated() {
            body += "<text x=\"\(f(x(index)))\" y=\"\(f(height - bottom + 20))\" class=\"axis\" text-anchor=\"middle\">D\(day.day)</text>"
        }
        body += "<text x=\"\(f(left + plotWidth / 2))\" y=\"\(f(height - 6))\" class=\"axis-title\" text-anchor=\"middle\">"
            + "days after the start: active on day N, of those whose day N has passed</text>"
        return svg(width: width, height: height, label: "Retention of completers and non-completers by day, with 95% confidence bands",
                   class: "retention-chart", body)
    }
}
