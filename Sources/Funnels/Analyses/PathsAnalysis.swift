/// Where they went (docs/funnels.md, "Where they went"): for the persons
/// who dropped at one step, the paths they took next, as a tree with persons
/// per node. Level 1 is the first event after the step (strictly later)
/// whose label differs from the step's own event's; each later level is the
/// first later event whose label differs from the level before; events of
/// one instant in label order, the funnel's `ignore:` matchers skipped, up
/// to the window's end (or `horizon` after the step). A path that ends
/// sooner ends in `(no further events)`.
public struct PathsAnalysis: FunnelAnalysis {
    public typealias Counts = PathCounts
    /// The report's row of the step dropped at, from 1.
    public let step: Int
    /// Microseconds after the step the paths look; nil: to the window's end.
    public let horizon: Int64?
    /// Levels followed.
    public static let depth = 3
    /// Branches kept per node; the rest are `other`.
    public static let branches = 8
    public static let other = "(other)"

    private let cell: PersonCell
    private let required: [Int]

    /// The paths after `step` of `funnel`, checked: a required step, not the last.
    public static func checked(step: Int, horizon: Int64? = nil, funnel: Funnel) throws(PersonCellError) -> PathsAnalysis {
        guard funnel.steps.indices.contains(step - 1) else { throw .stepOutOfRange(step, steps: funnel.steps.count) }
        guard !funnel.steps[step - 1].isOptional else { throw .optionalStepHasNoDropOff(step) }
        guard funnel.requiredStepIndices.last != step - 1 else { throw .lastStepHasNoDropOff(step) }
        return PathsAnalysis(step: step, horizon: horizon, funnel: funnel)
    }

    /// `step` must be a required step that is not the last (`checked` checks it).
    public init(step: Int, horizon: Int64? = nil, funnel: Funnel) {
        self.step = step
        self.horizon = horizon
        cell = PersonCell(.dropped, step: step)
        required = funnel.requiredStepIndices
    }

    public var id: AnalysisID { AnalysisID(rawValue: "paths after \(step)" + (horizon.map { " within \($0 / 1_000_000) s" } ?? "")) }
    public var readsEveryEvent: Bool { true }

    public func count(_ outcome: PersonOutcome, in funnel: Funnel, events: [FunnelEvent], into counts: inout PathCounts) -> Bool {
        guard outcome.windowClosed, cell.contains(outcome, required: required), let path = path(outcome, in: funnel, events: events) else {
            return false
        }
        counts.persons[path, default: 0] += 1
        return true
    }

    /// The labels one dropped person's events take after the step, at most
    /// `depth` of them, ending in `(no further events)` when they end sooner.
    public func path(_ outcome: PersonOutcome, in funnel: Funnel, events: [FunnelEvent]) -> [String]? {
        let index = step - 1
        guard outcome.stepTimes.indices.contains(index), let at = outcome.stepTimes[index], let start = outcome.chainStartTime else { return nil }
        let end: Int64
        if let horizon {
            let (sum, overflow) = at.addingReportingOverflow(horizon)
            end = overflow ? .max : sum
        } else {
            let (sum, overflow) = start.addingReportingOverflow(funnel.windowMicroseconds)
            end = overflow ? .max : sum
        }
        // The step's own event's label: of the events at its time that match it (with `any`, any step), the least.
        let matches: (FunnelEvent) -> Bool = funnel.order == .any
            ? { event in required.contains { funnel.steps[$0].matches(event) } } : { funnel.steps[index].matches($0) }
        var previous: String?
        for event in events where event.timestamp == at && matches(event) {
            let label = event.label
            if previous.map({ label < $0 }) ?? true { previous = label }
        }
        let after = events.filter { event in
            event.timestamp > at && event.timestamp <= end && !funnel.ignore.contains { $0.matches(event) }
        }.map { ($0.timestamp, $0.label) }.sorted { $0 < $1 }
        var path: [String] = []
        for (_, label) in after where label != previous {
            path.append(label)
            previous = label
            if path.count == Self.depth { return path }
        }
        return path + [DropOffFacts.noFurtherEvents]
    }

    public func fill(_ report: inout FunnelReport, funnel: Funnel, tally: FunnelTally, days: [String: PathCounts], now: Int64) {
        report.analyses[id] = Self.finding(tree(PathCounts(adding: days.values)), step: step, stepName: funnel.rowName(step - 1), horizon: horizon)
    }

    /// The tree of `counts`: per node its persons, the top `branches`
    /// children by persons (ties by label) and the rest as one `other`.
    public func tree(_ counts: PathCounts) -> PathNode {
        func node(_ label: String, _ paths: [([String], Int)]) -> PathNode {
            var children: [String: [([String], Int)]] = [:]
            for (path, persons) in paths where !path.isEmpty {
                children[path[0], default: []].append((Array(path.dropFirst()), persons))
            }
            var nodes = children.map { node($0.key, $0.value) }.sorted { ($1.persons, $0.label) < ($0.persons, $1.label) }
            if nodes.count > Self.branches {
                let rest = nodes[Self.branches...]
                nodes = Array(nodes.prefix(Self.branches)) + [PathNode(label: Self.other, persons: rest.reduce(0) { $0 + $1.persons }, children: [])]
            }
            return PathNode(label: label, persons: paths.reduce(0) { $0 + $1.1 }, children: nodes)
        }
        return node(funnelStepLabel, counts.persons.map { ($0.key, $0.value) })
    }

    private var funnelStepLabel: String { "step \(step)" }

    static func finding(_ tree: PathNode, step: Int, stepName: String, horizon: Int64?) -> AnalysisFinding {
        func finding(_ node: PathNode) -> AnalysisFinding {
            .fields([.init("label", .text(node.label)), .init("persons", .number(Double(node.persons))), .init("next", .list(node.children.map(finding)))])
        }
        return .fields([
            .init("step", .number(Double(step))), .init("step_name", .text(stepName)),
            .init("horizon_seconds", horizon.map { .number(Double($0) / 1_000_000) } ?? .null),
            .init("dropped", .number(Double(tree.persons))), .init("next", .list(tree.children.map(finding))),
        ])
    }
}

/// One node of the paths' tree: a label, the persons whose path passes it, and where they went next.
public struct PathNode: Sendable, Hashable {
    public var label: String
    public var persons: Int
    public var children: [PathNode]

    public init(label: String, persons: Int, children: [PathNode]) {
        self.label = label
        self.persons = persons
        self.children = children
    }
}

/// Persons per whole path (its labels, up to `PathsAnalysis.depth`), for one cohort day.
public struct PathCounts: DayCounts, Hashable {
    public var persons: [[String]: Int] = [:]

    public init() {}

    public mutating func merge(_ other: PathCounts) {
        for (path, count) in other.persons { persons[path, default: 0] += count }
    }

    public mutating func subtract(_ other: PathCounts) {
        for (path, count) in other.persons {
            let left = persons[path, default: 0] - count
            persons[path] = left == 0 ? nil : left
        }
    }
}
