/// An audience's condition in words, one way only: what `onramp audiences
/// show` prints and what the job fingerprints. The job stores the
/// fingerprint beside an audience's rows and recomputes an audience whose
/// definition changed, as it does a funnel (docs/audiences.md).
public enum AudienceDefinition {
    /// `funnel yoked-onboarding: stalled at step 3 for 1h`, `did event X at least 2 times within 7d`, …
    public static func text(of audience: Audience) -> String {
        let unit = audience.aggregateBy == .group ? "groups of \(audience.app)" : "persons of \(audience.app)"
        return "\(unit): \(text(of: audience.condition))"
    }

    public static func text(of condition: AudienceCondition) -> String {
        switch condition {
        case .funnel(let standing):
            let outcome: String
            switch standing.outcome {
            case .completed: outcome = "completed"
            case .cell(let cell): outcome = "\(cell.rawValue) at step \(standing.step ?? 1)"
            case .stalled(let seconds): outcome = "stalled at step \(standing.step ?? 1) for \(FunnelDefinition.duration(seconds))"
            }
            let days = standing.days.map { ", cohort days of the last \($0) (\(standing.timeZone))" } ?? ""
            return "funnel \(standing.funnel.name): \(outcome)\(days)"
        case .behaviour(let behaviour):
            let matchers = behaviour.matchers.map { FunnelDefinition.Matcher($0).text }.joined(separator: " | ")
            let times = behaviour.times == 1 ? "" : " at least \(behaviour.times) times"
            let within = behaviour.withinSeconds.map { " within \(FunnelDefinition.duration($0))" } ?? " ever"
            return "\(behaviour.did ? "did" : "did not") \(matchers)\(times)\(within)"
        case .allOf(let operands): return "all of (" + operands.map(text(of:)).joined(separator: "; ") + ")"
        case .anyOf(let operands): return "any of (" + operands.map(text(of:)).joined(separator: "; ") + ")"
        case .not(let operand): return "not (" + text(of: operand) + ")"
        }
    }

    /// A short digest of `text(of:)`: an audience whose fingerprint differs from
    /// the stored one is recomputed from the whole log.
    public static func fingerprint(of audience: Audience) -> String {
        String(FNV1a.hash(text(of: audience)), radix: 16)
    }
}
