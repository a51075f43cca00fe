/// What an analysis found that the report has no field of its own for, in
/// the shapes JSON has: a report carries it by the analysis's id
/// (`FunnelReport.analyses`), and `onramp funnel --format json` prints it
/// under `analyses`, so an analysis added outside the modules reaches the
/// output without a renderer knowing it.
public indirect enum AnalysisFinding: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case text(String)
    case list([AnalysisFinding])
    /// Named fields, in the order given.
    case fields([Field])

    public struct Field: Sendable, Hashable {
        public var name: String
        public var value: AnalysisFinding

        public init(_ name: String, _ value: AnalysisFinding) {
            self.name = name
            self.value = value
        }
    }
}
