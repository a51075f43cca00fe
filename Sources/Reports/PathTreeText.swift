public import Funnels

/// Where the persons who dropped at a step went next (`PathsAnalysis`), as
/// `onramp funnel --paths-after` and `onramp report --paths-after` print
/// it: an indented tree with persons and their share of the drop-offs, or
/// JSON.
public enum PathTreeText {
    /// How a tree is printed: `html` is the dashboard's drawing (`HTMLDashboard`).
    public enum Format: String, CaseIterable, Sendable {
        case table, json, html
    }

    /// What the tree is of.
    public struct About: Sendable {
        public var funnel: String
        public var app: String
        public var step: Int
        public var stepName: String
        /// Seconds after the step the paths look; nil: to the window's end.
        public var horizonSeconds: Int64?

        /// The tree `paths` counts for `funnel`.
        public init(_ funnel: Funnel, paths: PathsAnalysis) {
            self.funnel = funnel.name
            app = funnel.app
            step = paths.step
            stepName = funnel.rowName(paths.step - 1)
            horizonSeconds = paths.horizon.map { $0 / 1_000_000 }
        }
    }

    public static func table(_ tree: PathNode, about: About) -> String {
        let until = about.horizonSeconds.map { "within \(Formatting.duration(Double($0))) of the step" } ?? "to the window's end"
        var out = "\(about.funnel): where the \(tree.persons) who dropped at step \(about.step) (\(about.stepName)) went next, \(until)\n"
        var rows: [[String]] = [["next", "persons", "share"]]
        func walk(_ node: PathNode, depth: Int) {
            for child in node.children {
                rows.append([
                    String(repeating: "  ", count: depth) + child.label, "\(child.persons)",
                    Formatting.percent(tree.persons == 0 ? nil : Double(child.persons) / Double(tree.persons)),
                ])
                walk(child, depth: depth + 1)
            }
        }
        walk(tree, depth: 0)
        guard rows.count > 1 else { return out }
        // Lined up by hand: the labels' indentation is the tree.
        let widths = (0..<3).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            out += "  " + Formatting.pad(row[0], widths[0]) + "  " + Formatting.pad(row[1], widths[1], right: true) + "  "
                + Formatting.pad(row[2], widths[2], right: true) + "\n"
        }
        return out
    }

    public static func json(_ tree: PathNode, about: About) -> String {
        func json(_ node: PathNode) -> JSON {
            .object([("label", .string(node.label)), ("persons", .number(Double(node.persons))), ("next", .array(node.children.map(json)))])
        }
        return JSON.object([
            ("funnel", .string(about.funnel)), ("app", .string(about.app)), ("step", .number(Double(about.step))),
            ("step_name", .string(about.stepName)), ("horizon_seconds", about.horizonSeconds.map { .number(Double($0)) } ?? .null),
            ("dropped", .number(Double(tree.persons))), ("next", .array(tree.children.map(json))),
        ]).serialized() + "\n"
    }
}
