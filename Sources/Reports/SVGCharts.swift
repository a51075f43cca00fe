import Foundation
import Funnels

/// The inline SVG charts of the HTML dashboard. Every chart is a plain string
/// with a `viewBox`, scaled by CSS to the page width; every text from data is
/// escaped, and every mark carries a `<title>` tooltip with its exact numbers.
enum SVGCharts {
    // MARK: Funnel bars

    /// One horizontal bar per step (width ∝ persons reaching it), the part lost
    /// since the previous required step in red, and under each required step
    /// the persons who dropped off there and those still in progress.
    static func funnelBars(_ steps: [StepReport]) -> String {
        guard let top = steps.first?.persons, top > 0 else {
            return empty(width: 900, height: 80, "No one has started this funnel in the report range.")
        }
        let width = 900.0, labelWidth = 250.0, barMax = 440.0, barHeight = 30.0, gap = 26.0
        let lastRequired = steps.lastIndex { !$0.isOptional }
        func barWidth(_ persons: Int) -> Double { max(persons > 0 ? 1 : 0, Double(persons) / Double(top) * barMax) }

        var body = ""
        var y = 8.0
        var previousRequired: StepReport?
        for (position, step) in steps.enumerated() {
            let w = barWidth(step.persons)
            let label = "\(step.index). " + HTML.truncate(step.name, to: 30) + (step.isOptional ? " (optional)" : "")
            body += "<g class=\"step\">"
            body += "<title>\(HTML.escape(step.name)): \(step.persons) persons, \(Formatting.percent(step.conversionFromPrevious.value)) from previous</title>"
            body += "<text x=\"0\" y=\"\(f(y + barHeight / 2 + 5))\" class=\"label\">\(HTML.escape(label))</text>"
            body += "<rect x=\"\(f(labelWidth))\" y=\"\(f(y))\" width=\"\(f(barMax))\" height=\"\(f(barHeight))\" class=\"track\"/>"
            if let previous = previousRequired, !step.isOptional {
                let lost = barWidth(previous.persons) - w
                if lost > 0.5 {
                    body += "<rect x=\"\(f(labelWidth + w))\" y=\"\(f(y))\" width=\"\(f(lost))\" height=\"\(f(barHeight))\" class=\"lost\"/>"
                }
            }
            body += "<rect x=\"\(f(labelWidth))\" y=\"\(f(y))\" width=\"\(f(w))\" height=\"\(f(barHeight))\" class=\"\(step.isOptional ? "bar optional" : "bar")\"/>"
            let share = step.isOptional
                ? "\(Formatting.percent(step.conversionFromPrevious.value)) of next"
                : Formatting.percent(step.conversionFromStart.value)
            body += "<text x=\"\(f(labelWidth + barMax + 10))\" y=\"\(f(y + barHeight / 2 + 5))\" class=\"value\">\(step.persons) · \(share)</text>"
            body += "</g>"
            y += barHeight
            if !step.isOptional, position != lastRequired {
                var note = "▼ \(step.dropOff) dropped off (\(Formatting.percent(step.dropOffRate.value)))"
                if step.inProgress > 0 { note += " · \(step.inProgress) in progress" }
                body += "<text x=\"\(f(labelWidth + 6))\" y=\"\(f(y + 18))\" class=\"drop\">\(note)</text>"
                previousRequired = step
            } else if !step.isOptional {
                previousRequired = step
            }
            y += gap
        }
        return svg(width: width, height: y, label: "Funnel: persons reaching each step", class: "funnel", body)
    }

    // MARK: Completion trend

    /// Completion rate per cohort day with its 95 % Wilson band; days whose
    /// windows are still open sit on a hatched background, with hollow points
    /// and a dashed line, labelled "in progress". An optional target line.
    static func completionTrend(_ cohorts: [CohortDay], target: (threshold: Double, label: String)?) -> String {
        let days = cohorts.filter { $0.completionRate.value != nil }
        guard !days.isEmpty else { return empty(width: 900, height: 80, "No cohort days in the report range.") }
        let width = 900.0, height = 300.0, left = 56.0, right = 16.0, top = 30.0, bottom = 44.0
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        let slot = plotWidth / Double(days.count)
        func x(_ i: Int) -> Double { left + (Double(i) + 0.5) * slot }
        func y(_ rate: Double) -> Double { top + (1 - min(1, max(0, rate))) * plotHeight }

        var body = "<defs><pattern id=\"hatch\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
            + "<rect width=\"8\" height=\"8\" class=\"hatch-bg\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"8\" class=\"hatch-line\"/></pattern></defs>"
        // In-progress columns, merged into runs.
        var i = 0
        while i < days.count {
            guard days[i].inProgress else { i += 1; continue }
            var end = i
            while end + 1 < days.count, days[end + 1].inProgress { end += 1 }
            let x0 = left + Double(i) * slot, runWidth = Double(end - i + 1) * slot
            body += "<rect x=\"\(f(x0))\" y=\"\(f(top))\" width=\"\(f(runWidth))\" height=\"\(f(plotHeight))\" fill=\"url(#hatch)\" class=\"in-progress-zone\"/>"
            body += "<text x=\"\(f(x0 + runWidth / 2))\" y=\"\(f(top - 8))\" class=\"zone-label\" text-anchor=\"middle\">in progress</text>"
            i = end + 1
        }
        // Grid and y axis.
        for tick in stride(from: 0.0, through: 1.0, by: 0.25) {
            body += "<line x1=\"\(f(left))\" x2=\"\(f(width - right))\" y1=\"\(f(y(tick)))\" y2=\"\(f(y(tick)))\" class=\"grid\"/>"
            body += "<text x=\"\(f(left - 8))\" y=\"\(f(y(tick) + 4))\" class=\"axis\" text-anchor=\"end\">\(Int(tick * 100))%</text>"
        }
        // Confidence band.
        let bounds = days.indices.compactMap { index in days[index].completionRate.ci95.map { (index, $0) } }
        if !bounds.isEmpty {
            let upper = bounds.map { "\(f(x($0.0))),\(f(y($0.1.upper)))" }
            let lower = bounds.reversed().map { "\(f(x($0.0))),\(f(y($0.1.lower)))" }
            body += "<polygon points=\"\((upper + lower).joined(separator: " "))\" class=\"band\"><title>95% confidence interval</title></polygon>"
        }
        // Target.
        if let target {
            body += "<line x1=\"\(f(left))\" x2=\"\(f(width - right))\" y1=\"\(f(y(target.threshold)))\" y2=\"\(f(y(target.threshold)))\" class=\"target-line\"/>"
            body += "<text x=\"\(f(width - right - 4))\" y=\"\(f(y(target.threshold) - 6))\" class=\"target-label\" text-anchor=\"end\">\(HTML.escape(target.label))</text>"
        }
        // Line, dashed where it touches an in-progress day.
        for index in days.indices.dropFirst() {
            guard let a = days[index - 1].completionRate.value, let b = days[index].completionRate.value else { continue }
            let dashed = days[index - 1].inProgress || days[index].inProgress
            body += "<line x1=\"\(f(x(index - 1)))\" y1=\"\(f(y(a)))\" x2=\"\(f(x(index)))\" y2=\"\(f(y(b)))\" class=\"\(dashed ? "trend dashed" : "trend")\"/>"
        }
        // Whiskers: the interval per day, visible even where the band cannot be (one day).
        for (index, ci) in bounds {
            body += "<line x1=\"\(f(x(index)))\" x2=\"\(f(x(index)))\" y1=\"\(f(y(ci.upper)))\" y2=\"\(f(y(ci.lower)))\" class=\"whisker\"/>"
        }
        let labelEvery = max(1, Int((Double(days.count) / 12).rounded(.up)))
        for (index, day) in days.enumerated() {
            guard let rate = day.completionRate.value else { continue }
            let status = day.inProgress ? ", in progress" : ""
            body += "<circle cx=\"\(f(x(index)))\" cy=\"\(f(y(rate)))\" r=\"4.5\" class=\"\(day.inProgress ? "point open" : "point")\""
                + " data-day=\"\(HTML.escape(day.day))\" data-rate=\"\(day.completionRate.value.map { String($0) } ?? "")\">"
                + "<title>\(HTML.escape(day.day)): \(Formatting.percent(rate)) \(Formatting.interval(day.completionRate)), "
                + "\(day.completed) of \(day.started)\(status)</title></circle>"
            if index % labelEvery == 0 {
                body += "<text x=\"\(f(x(index)))\" y=\"\(f(height - bottom + 20))\" class=\"axis\" text-anchor=\"middle\">\(HTML.escape(String(day.day.suffix(5))))</text>"
            }
        }
        body += "<text x=\"\(f(left + plotWidth / 2))\" y=\"\(f(height - 6))\" class=\"axis-title\" text-anchor=\"middle\">cohort day (\(HTML.escape(days[0].day)) … \(HTML.escape(days[days.count - 1].day)))</text>"
        return svg(width: width, height: height, label: "Completion rate by cohort day with 95% confidence band", class: "trend-chart", body)
    }

    // MARK: Time to complete

    /// Histogram of completers' time to complete on "nice" duration bins, with
    /// the median and p90 marked. A long tail beyond 3 × p90 goes into one
    /// overflow bar so that the bulk of the distribution stays readable.
    static func histogram(_ durations: [Double], median: Double?, p90: Double?) -> String {
        let values = durations.filter { $0.isFinite && $0 >= 0 }.sorted()
        guard let largest = values.last else { return empty(width: 900, height: 80, "No one has completed this funnel yet.") }
        let width = 900.0, height = 270.0, left = 52.0, right = 40.0, top = 44.0, bottom = 40.0
        let plotHeight = height - top - bottom

        let spread = p90 ?? largest
        let cap = spread > 0 && largest > 3 * spread ? 2 * spread : largest
        let binWidth = niceBinWidth(cap / 24)
        // Bins are [k·w, (k+1)·w), so the largest value is never drawn on the
        // right edge; with an overflow bar the bins end exactly at the cap.
        let binCount = cap < largest ? max(1, Int((cap / binWidth).rounded(.up))) : Int(cap / binWidth) + 1
        let limit = Double(binCount) * binWidth
        var counts = [Int](repeating: 0, count: binCount)
        var overflow = 0
        for value in values {
            if value > limit { overflow += 1; continue }
            counts[min(binCount - 1, Int(value / binWidth))] += 1
        }
        let columns = binCount + (overflow > 0 ? 2 : 0)  // a gap, then the overflow bar
        let slot = (width - left - right) / Double(columns)
        let tallest = max(1, max(counts.max() ?? 0, overflow))
        func y(_ count: Int) -> Double { top + plotHeight * (1 - Double(count) / Double(tallest)) }
        func x(_ seconds: Double) -> Double { left + min(seconds, limit) / binWidth * slot }

        var body = ""
        for tick in [0, tallest / 2, tallest] where tick == 0 || tick != tallest / 2 || tallest >= 2 {
            body += "<line x1=\"\(f(left))\" x2=\"\(f(width - right))\" y1=\"\(f(y(tick)))\" y2=\"\(f(y(tick)))\" class=\"grid\"/>"
            body += "<text x=\"\(f(left - 8))\" y=\"\(f(y(tick) + 4))\" class=\"axis\" text-anchor=\"end\">\(tick)</text>"
        }
        for (index, count) in counts.enumerated() where count > 0 {
            let from = Double(index) * binWidth
            body += "<rect x=\"\(f(left + Double(index) * slot + 0.5))\" y=\"\(f(y(count)))\" width=\"\(f(max(1, slot - 1)))\" height=\"\(f(top + plotHeight - y(count)))\" class=\"hist\">"
                + "<title>\(Formatting.duration(from))–\(Formatting.duration(from + binWidth)): \(count) completers</title></rect>"
        }
        if overflow > 0 {
            let ox = left + Double(binCount + 1) * slot
            body += "<rect x=\"\(f(ox + 0.5))\" y=\"\(f(y(overflow)))\" width=\"\(f(max(1, slot - 1)))\" height=\"\(f(top + plotHeight - y(overflow)))\" class=\"hist overflow\">"
                + "<title>over \(Formatting.duration(limit)) (up to \(Formatting.duration(largest))): \(overflow) completers</title></rect>"
            body += "<text x=\"\(f(ox + slot / 2))\" y=\"\(f(height - bottom + 18))\" class=\"axis\" text-anchor=\"middle\">&gt;\(Formatting.duration(limit))</text>"
        }
        let tickEvery = max(1, Int((Double(binCount) / 8).rounded(.up)))
        for edge in stride(from: 0, through: binCount, by: tickEvery) {
            let ex = left + Double(edge) * slot
            body += "<line x1=\"\(f(ex))\" x2=\"\(f(ex))\" y1=\"\(f(top + plotHeight))\" y2=\"\(f(top + plotHeight + 4))\" class=\"tick\"/>"
            body += "<text x=\"\(f(ex))\" y=\"\(f(height - bottom + 18))\" class=\"axis\" text-anchor=\"middle\">\(Formatting.duration(Double(edge) * binWidth))</text>"
        }
        body += "<line x1=\"\(f(left))\" x2=\"\(f(width - right))\" y1=\"\(f(top + plotHeight))\" y2=\"\(f(top + plotHeight))\" class=\"baseline\"/>"
        // Median above p90 so their labels never collide.
        for (name, value, row, style) in [("median", median, 0.0, "median"), ("p90", p90, 16.0, "p90")] {
            guard let value else { continue }
            let mx = value > limit ? left + Double(binCount + 1) * slot + slot / 2 : x(value)
            let anchorEnd = mx > width - 170
            body += "<line x1=\"\(f(mx))\" x2=\"\(f(mx))\" y1=\"\(f(top - 26 + row))\" y2=\"\(f(top + plotHeight))\" class=\"marker \(style)\"/>"
            body += "<text x=\"\(f(anchorEnd ? mx - 5 : mx + 5))\" y=\"\(f(top - 16 + row))\" class=\"marker-label \(style)\" text-anchor=\"\(anchorEnd ? "end" : "start")\">\(name) \(Formatting.duration(value))</text>"
        }
        body += "<text x=\"\(f(left + (width - left - right) / 2))\" y=\"\(f(height - 4))\" class=\"axis-title\" text-anchor=\"middle\">time to complete (bins of \(Formatting.duration(binWidth)))</text>"
        return svg(width: width, height: height, label: "Distribution of time to complete", class: "histogram", body)
    }

    /// The smallest "round" duration (1 s, 2 s, 5 s, … 1 h, … days) at least `seconds`.
    static func niceBinWidth(_ seconds: Double) -> Double {
        let steps: [Double] = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400]
        if let step = steps.first(where: { $0 >= seconds }) { return step }
        return (seconds / 86_400).rounded(.up) * 86_400
    }

    // MARK: Small marks

    /// A 0–100 % scale with the interval as a bar and the rate as a dot, for tables.
    static func rateBar(_ rate: Rate) -> String {
        guard let value = rate.value, let ci = rate.ci95 else { return "" }
        let width = 140.0
        return "<svg class=\"ratebar\" viewBox=\"0 0 \(f(width)) 14\" width=\"\(f(width))\" height=\"14\" role=\"img\" aria-label=\"\(Formatting.percent(value)) \(Formatting.interval(rate))\">"
            + "<line x1=\"0\" x2=\"\(f(width))\" y1=\"7\" y2=\"7\" class=\"scale\"/>"
            + "<rect x=\"\(f(ci.lower * width))\" y=\"3\" width=\"\(f(max(1, (ci.upper - ci.lower) * width)))\" height=\"8\" class=\"ci\"/>"
            + "<circle cx=\"\(f(value * width))\" cy=\"7\" r=\"3.5\" class=\"dot\"/></svg>"
    }

    /// A tiny completion-rate line per cohort day for the index cards.
    static func sparkline(_ cohorts: [CohortDay]) -> String {
        let points = cohorts.compactMap { day in day.completionRate.value.map { (day, $0) } }
        guard points.count >= 2 else { return "" }
        let width = 260.0, height = 44.0
        func x(_ i: Int) -> Double { 4 + Double(i) / Double(points.count - 1) * (width - 8) }
        func y(_ rate: Double) -> Double { 4 + (1 - rate) * (height - 8) }
        let line = points.indices.map { "\(f(x($0))),\(f(y(points[$0].1)))" }.joined(separator: " ")
        var body = "<polyline points=\"\(line)\" class=\"spark\"/>"
        for (index, point) in points.enumerated() where point.0.inProgress {
            body += "<circle cx=\"\(f(x(index)))\" cy=\"\(f(y(point.1)))\" r=\"2.5\" class=\"point open\"/>"
        }
        return "<svg class=\"sparkline\" viewBox=\"0 0 \(f(width)) \(f(height))\" role=\"img\" aria-label=\"completion rate by cohort day\">\(body)</svg>"
    }

    // MARK: Helpers

    static func svg(width: Double, height: Double, label: String, class name: String, _ body: String) -> String {
        "<svg class=\"chart \(name)\" viewBox=\"0 0 \(f(width)) \(f(height))\" role=\"img\" aria-label=\"\(HTML.escape(label))\">\(body)</svg>"
    }

    static func empty(width: Double, height: Double, _ message: String) -> String {
        svg(width: width, height: height, label: message, class: "empty",
            "<text x=\"\(f(width / 2))\" y=\"\(f(height / 2))\" class=\"empty-label\" text-anchor=\"middle\">\(HTML.escape(message))</text>")
    }

    /// SVG coordinates with one decimal, independent of the locale.
    static func f(_ value: Double) -> String {
        guard value.isFinite else { return "0" }
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }
}
