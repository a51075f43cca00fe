import Funnels

/// Where those who dropped at a step went next, as the HTML dashboard draws
/// it: an icicle (the explorer's drawing, in inline SVG), a column per level,
/// each node as tall as its persons, so the largest branches read first.
enum PathTreeChart {
    static func svg(_ tree: PathNode, about: PathTreeText.About) -> String {
        guard tree.persons > 0 else {
            return SVGCharts.empty(width: 900, height: 60, "No one dropped at step \(about.step) in the stored cohort days.")
        }
        let width = 900.0, height = 320.0, column = width / Double(PathsAnalysis.depth + 1)
        var body = ""
        func draw(_ node: PathNode, path: [String], depth: Int, from y0: Double, to y1: Double) {
            let share = Formatting.percent(Double(node.persons) / Double(tree.persons))
            let kind = depth == 0 ? "root" : node.label == DropOffFacts.noFurtherEvents ? "none" : node.label == PathsAnalysis.other ? "other" : "level\(min(depth, 3))"
            body += "<g class=\"path-node \(kind)\" data-depth=\"\(depth)\" data-path=\"\(HTML.escape(path.joined(separator: " › ")))\" data-persons=\"\(node.persons)\">"
            body += "<title>\(HTML.escape(path.last ?? node.label)): \(node.persons) persons (\(share) of those who dropped)</title>"
            body += "<rect x=\"\(SVGCharts.f(Double(depth) * column))\" y=\"\(SVGCharts.f(y0))\" width=\"\(SVGCharts.f(column - 2))\""
                + " height=\"\(SVGCharts.f(max(1, y1 - y0 - 1)))\"/>"
            if y1 - y0 >= 16 {
                let text = HTML.truncate(node.label, to: 20) + " · \(node.persons)" + (depth == 0 ? "" : " · " + share)
                body += "<text x=\"\(SVGCharts.f(Double(depth) * column + 5))\" y=\"\(SVGCharts.f(y0 + 13))\">\(HTML.escape(text))</text>"
            }
            body += "</g>"
            var y = y0
            for child in node.children {
                let next = y + (y1 - y0) * Double(child.persons) / Double(max(1, node.persons))
                draw(child, path: path + [child.label], depth: depth + 1, from: y, to: next)
                y = next
            }
        }
        draw(PathNode(label: "dropped at \(about.step)", persons: tree.persons, children: tree.children), path: [], depth: 0, from: 0, to: height)
        return SVGCharts.svg(width: width, height: height, label: "Where those who dropped at step \(about.step) went next", class: "paths", body)
    }

    /// The dashboard's section: the chart and what it is of.
    static func section(_ tree: PathNode, about: PathTreeText.About) -> String {
        let until = about.horizonSeconds.map { "within \(Formatting.duration(Double($0))) of the step" } ?? "to the window's end"
        return "<section id=\"paths-after\" data-step=\"\(about.step)\" data-dropped=\"\(tree.persons)\">"
            + "<h2>Where those who dropped at step \(about.step) (\(HTML.escape(about.stepName))) went next</h2>"
            + svg(tree, about: about)
            + "<p class=\"legend\">\(tree.persons) dropped; their next events \(until), up to \(PathsAnalysis.depth) levels,"
            + " each column a level, each box as tall as its persons (the top \(PathsAnalysis.branches) a level, the rest as \(PathsAnalysis.other)).</p>"
            + "</section>"
    }
}
