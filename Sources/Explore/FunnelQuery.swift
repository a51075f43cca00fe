public import Funnels

/// A funnel asked at query time: the definition, the clock it is evaluated
/// at and the cohort days it reports (docs/explore.md).
public struct FunnelQuery: Sendable {
    /// The funnel; the standard analyses asked are made for it again when it changes.
    public var funnel: Funnel {
        didSet { analyses = analyses.map { StandardAnalyses.named($0.id, for: [funnel]) ?? $0 } }
    }
    /// IANA zone the cohort days are cut in.
    public var timeZone: String
    /// The clock in-progress decisions are taken at (microseconds).
    public var now: Int64
    public var from: String?
    public var to: String?
    /// Analyses counted beside the funnel, each as the nightly job counts
    /// it (`FunnelAnalysis`), made for this query's funnel.
    public var analyses: [any FunnelAnalysis] = []
    /// Audiences the persons counted must be in, or not (`--audience`, `--not-audience`), with their members once read.
    public var audiences = AudienceFilter()

    public init(funnel: Funnel, timeZone: String, now: Int64, from: String? = nil, to: String? = nil) {
        self.funnel = funnel
        self.timeZone = timeZone
        self.now = now
        self.from = from
        self.to = to
    }

    /// Whether the standard drop-off analysis is asked (`onramp funnel --diagnostics`).
    public var diagnostics: Bool {
        get { asks(.diagnostics) }
        set { ask(.diagnostics, newValue) }
    }

    /// Whether the standard retention analysis is asked (`onramp funnel --retention`).
    public var retention: Bool {
        get { asks(.retention) }
        set { ask(.retention, newValue) }
    }

    /// Whether an analysis named `id` is asked.
    public func asks(_ id: AnalysisID) -> Bool { analyses.contains { $0.id == id } }

    /// Asks (or no longer asks) the standard analysis named `id`.
    public mutating func ask(_ id: AnalysisID, _ asked: Bool = true) {
        analyses.removeAll { $0.id == id }
        if asked, let analysis = StandardAnalyses.named(id, for: [funnel]) { analyses.append(analysis) }
    }

    /// The attribute paths the query reads: its funnel's.
    var paths: Set<String> { funnel.referencedPaths }

    func includes(_ day: String) -> Bool {
        (from.map { day >= $0 } ?? true) && (to.map { day <= $0 } ?? true)
    }
}

/// When a query gives up: its timeout, counted from its start, or a cancel
/// by whoever asked (`QueryControl`).
struct Deadline: Sendable {
    let at: ContinuousClock.Instant?
    let seconds: Double
    let control: QueryControl?

    init(seconds: Double?, control: QueryControl? = nil) {
        at = seconds.map { .now + .seconds($0) }
        self.seconds = seconds ?? 0
        self.control = control
    }

    /// Throws `ExploreError.cancelled` once cancelled, `.timedOut` once the time has passed.
    func check() throws {
        if control?.isCancelled == true { throw ExploreError.cancelled }
        if let at, ContinuousClock.now > at { throw ExploreError.timedOut(seconds) }
    }
}

/// What a query-time funnel found: the report `onramp report` would print
/// for the same definition, plus what only a query gives.
public struct FunnelAnswer: Sendable {
    public var report: FunnelReport
    /// Completers' seconds from step 1 to the last step (the dashboard's distribution).
    public var secondsToComplete: [Double]
    /// The completers' times, binned (`TimeHistogram`).
    public var histogram: [TimeHistogram.Bin]
    /// Events of the app the query looked at, and how the store was brought up to date.
    public var events: Int
    public var newEvents: Int
    public var storeRebuilt: Bool
    /// Counted by an earlier query from the same events, and exact still (`AnswerCache`).
    public var reusedAnswer: Bool
    public var refreshSeconds: Double
    public var evaluateSeconds: Double
    /// The first day (UTC) of the log's months of the app, when earlier ones are archived: the answer counts from there.
    public var logFrom: String?
    /// What each analysis asked counted, by cohort day, by the analysis's id.
    public var analysisDays: [AnalysisID: [String: any DayCounts]] = [:]

    /// What `analysis` (one the query asked) counted, by cohort day.
    public func days<Analysis: FunnelAnalysis>(of analysis: Analysis) -> [String: Analysis.Counts] {
        (analysisDays[analysis.id] ?? [:]).compactMapValues { $0 as? Analysis.Counts }
    }
}
