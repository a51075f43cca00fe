/// A target checked against a report; `met` is false when there is no value
/// (no one started or completed), so an empty funnel never passes silently.
public struct TargetResult: Sendable, Hashable {
    public var name: String
    /// The configured limit (`threshold` or `max`).
    public var threshold: Double
    public var bound: FunnelTarget.Bound
    public var value: Double?
    public var met: Bool

    init(target: FunnelTarget, report: FunnelReport) {
        name = target.name
        bound = target.bound
        threshold = target.bound.limit
        switch target.metric {
        case .completionRate:
            value = report.completionRate.value
        case .medianSecondsToComplete:
            value = report.timeToComplete.medianSeconds
        case .p90SecondsToComplete:
            value = report.timeToComplete.p90Seconds
        case .conversion(let from, let to):
            if let fromRow = report.step(named: from), let toRow = report.step(named: to) {
                value = Rate(successes: toRow.persons, trials: fromRow.persons).value
            } else {
                value = nil
            }
        }
        met = value.map { target.bound.isMet(by: $0) } ?? false
    }
}
