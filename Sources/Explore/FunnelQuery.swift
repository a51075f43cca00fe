public import Funnels

/// A funnel asked at query time: the definition, the clock it is evaluated
/// at and the cohort days it reports (docs/explore.md).
public struct FunnelQuery: Sendable {
    public var funnel: Funnel
    /// IANA zone the cohort days are cut in.
    public var timeZone: String
    /// The clock in-progress decisions are taken at (microseconds).
    public var now: Int64
    public var from: String?
    public var to: String?
    public var diagnostics = false
    public var retention = false

    public init(funnel: Funnel, timeZone: String, now: Int64, from: String? = nil, to: String? = nil) {
        self.funnel = funnel
        self.timeZone = timeZone
        self.now = now
        self.from = from
        self.to = to
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
}
