/// Why persons drop off (docs/funnels.md, "Why they drop off"): each
/// person's `DropOffFacts`, counted per cohort day once their window has
/// closed (`DropOffCounts`: lingering times, next events, drivers' 2×2
/// counts), and drawn as the report's `DropOffDiagnostics` over the days
/// reported. The nightly job also stores each person's facts.
public struct DropOffAnalysis: FunnelAnalysis {
    public typealias Counts = DropOffCounts
    public static let id = AnalysisID(rawValue: "diagnostics")
    public var id: AnalysisID { Self.id }
    public var readsEveryEvent: Bool { true }
    /// Each funnel's shape, by name: worked out once, not per person.
    package let shapes: [String: DropOffFacts.Shape]

    public init(funnels: [Funnel]) {
        shapes = Dictionary(funnels.map { ($0.name, DropOffFacts.Shape($0)) }, uniquingKeysWith: { first, _ in first })
    }

    /// What one person's events say, when there is anything to say (they started, or were excluded).
    package func facts(_ outcome: PersonOutcome, in funnel: Funnel, events: [FunnelEvent]) -> (DropOffFacts, DropOffFacts.Shape)? {
        guard let shape = shapes[funnel.name], let facts = DropOffFacts.of(outcome, in: funnel, shape: shape, events: events) else {
            return nil
        }
        return (facts, shape)
    }

    /// Counts a person once their window has closed (`DropOffCounts.add`):
    /// the facts of one still open are not worked out.
    public func count(_ outcome: PersonOutcome, in funnel: Funnel, events: [FunnelEvent], into counts: inout DropOffCounts) -> Bool {
        guard outcome.windowClosed, let (facts, shape) = facts(outcome, in: funnel, events: events) else { return false }
        counts.add(outcome, facts: facts, required: shape.required)
        return true
    }

    public func fill(_ report: inout FunnelReport, funnel: Funnel, tally: FunnelTally, days: [String: DropOffCounts], now: Int64) {
        report.diagnostics = DropOffDiagnostics(funnel: funnel, tally: tally, counts: DropOffCounts(adding: days.values))
    }
}
