/// Whether finishing onboarding goes with staying (docs/funnels.md,
/// "Retention"): each started person's start and the configured days after
/// it on which they were active, counted per cohort day once their window
/// has closed (`RetentionCounts`), and drawn as the report's
/// `RetentionReport` at the report's clock. The nightly job also stores
/// each person's retention days, and adds later activity to them.
public struct RetentionAnalysis: FunnelAnalysis {
    public typealias Counts = RetentionCounts
    public static let id = AnalysisID(rawValue: "retention")
    public var id: AnalysisID { Self.id }
    public var readsEveryEvent: Bool { true }
    /// Each funnel's settings, by name.
    package let settings: [String: RetentionSettings]
    /// Every day after a start on which some funnel looks for activity.
    public let activityDays: Set<Int>

    public init(funnels: [Funnel]) {
        settings = Dictionary(funnels.map { ($0.name, $0.retention) }, uniquingKeysWith: { first, _ in first })
        activityDays = Set(funnels.flatMap(\.retention.days))
    }

    public func count(_ outcome: PersonOutcome, in funnel: Funnel, events: [FunnelEvent], into counts: inout RetentionCounts) -> Bool {
        guard outcome.windowClosed, let (start, retained) = retainedDays(outcome, in: funnel, events: events) else { return false }
        count(outcome, start: start, retained: retained, into: &counts)
        return true
    }

    /// A started, not excluded person's start and retention days.
    package func retainedDays(_ outcome: PersonOutcome, in funnel: Funnel, events: [FunnelEvent]) -> (start: Int64, days: [Int])? {
        guard outcome.level >= 1, !outcome.excluded, let start = outcome.startTime, let settings = settings[funnel.name] else { return nil }
        return (start, settings.retainedDays(start: start, events: events))
    }

    /// Counts a person whose retention days are known, once their window has closed.
    package func count(_ outcome: PersonOutcome, start: Int64, retained: [Int], into counts: inout RetentionCounts) {
        guard outcome.windowClosed else { return }
        counts.add(start: start, completed: outcome.completed, retainedDays: retained)
    }

    public func fill(_ report: inout FunnelReport, funnel: Funnel, tally: FunnelTally, days: [String: RetentionCounts], now: Int64) {
        let retentionDays = settings[funnel.name]?.days ?? funnel.retention.days
        report.retention = RetentionReport(days: retentionDays, cells: days.mapValues { $0.cells(days: retentionDays, now: now) })
    }
}

extension DropOffCounts: DayCounts {}
extension RetentionCounts: DayCounts {}
