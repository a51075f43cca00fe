public import Foundation

/// Names an analysis: in a query's list, in the answer cache's key and in
/// the report's JSON (`FunnelReport.analyses`).
public struct AnalysisID: RawRepresentable, Hashable, Sendable, Codable, Comparable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    public static func < (a: AnalysisID, b: AnalysisID) -> Bool { a.rawValue < b.rawValue }
}

/// What an analysis adds up per funnel and cohort day: counts that add and
/// subtract (the nightly job takes a changed day's stored counts, less its
/// touched persons' and plus what it counted), kept as JSON where answers
/// are kept (the explorer's answer cache).
public protocol DayCounts: Sendable, Codable {
    /// Nothing counted.
    init()
    mutating func merge(_ other: Self)
    mutating func subtract(_ other: Self)
}

/// An analysis of persons' outcomes, written once for both schedules. The
/// nightly job and query time evaluate every person with the same engine
/// and hand each outcome, with the person's events, to `count`, per funnel
/// and cohort day; query time draws the analysis's part of a report from the
/// days' counts with `fill`. The job also stores it (the Projection module
/// makes an analysis a `PersonAnalysis`, with its per-person rows and day
/// tables), and its report reads those tables back. Neither names an analysis: the job runs the
/// standard ones (`StandardAnalyses`), a query the ones it is given.
public protocol FunnelAnalysis: Sendable {
    associatedtype Counts: DayCounts
    /// Its name in a query and in the report's JSON.
    var id: AnalysisID { get }
    /// Whether it reads events that cannot change an outcome (what persons
    /// did between steps, activity long after): then query time hands the
    /// engine every event of a person, not only those a step names.
    var readsEveryEvent: Bool { get }
    /// Adds one person's outcome in `funnel` (`events`: all of theirs the
    /// engine saw, in time order) to their cohort day's counts; says whether
    /// it counted them (a day none counted for has no counts).
    func count(_ outcome: PersonOutcome, in funnel: Funnel, events: [FunnelEvent], into counts: inout Counts) -> Bool
    /// Whether it lists persons, and so needs to know who each one is
    /// (`count(_:of:in:events:into:)`): query time works out the ids only then.
    var listsPersons: Bool { get }
    /// `count`, for an analysis that lists persons: `unit` says who the
    /// person is, worked out when called.
    func count(_ outcome: PersonOutcome, of unit: () -> CountedUnit, in funnel: Funnel, events: [FunnelEvent], into counts: inout Counts) -> Bool
    /// Its part of `funnel`'s report (whose persons `tally` adds up), from
    /// the counts of the days reported, at the clock `now`.
    func fill(_ report: inout FunnelReport, funnel: Funnel, tally: FunnelTally, days: [String: Counts], now: Int64)
}

extension FunnelAnalysis {
    public var listsPersons: Bool { false }

    public func count(_ outcome: PersonOutcome, of unit: () -> CountedUnit, in funnel: Funnel, events: [FunnelEvent], into counts: inout Counts) -> Bool {
        count(outcome, in: funnel, events: events, into: &counts)
    }

    /// `count` into a day's counts whatever their type (nil until someone
    /// counts for the day). The counts leave the existential while they
    /// change, so they have one owner and adding to them copies nothing.
    public func count(
        _ outcome: PersonOutcome, of unit: () -> CountedUnit, in funnel: Funnel, events: [FunnelEvent], into counts: inout (any DayCounts)?
    ) {
        let had = counts != nil
        var day = counts as? Counts ?? Counts()
        counts = nil
        let counted = count(outcome, of: unit, in: funnel, events: events, into: &day)
        if had || counted { counts = day }
    }

    /// `fill` from days' counts whatever their type; counts of another type are none.
    public func fill(_ report: inout FunnelReport, funnel: Funnel, tally: FunnelTally, counted days: [String: any DayCounts], now: Int64) {
        fill(&report, funnel: funnel, tally: tally, days: days.compactMapValues { $0 as? Counts }, now: now)
    }

    /// Days' counts as JSON, for the answer cache.
    public func encode(_ days: [String: any DayCounts]) throws -> Data {
        try JSONEncoder().encode(days.compactMapValues { $0 as? Counts })
    }

    /// Days' counts back from `encode`.
    public func decode(_ data: Data) throws -> [String: any DayCounts] {
        try JSONDecoder().decode([String: Counts].self, from: data)
    }
}

extension DayCounts {
    /// The counts of `days` added up.
    public init(adding days: some Sequence<Self>) {
        self.init()
        for day in days { merge(day) }
    }

    /// Adds these counts to `other` in place (nil: nothing counted yet;
    /// another type counts as nothing), taken out of the existential while
    /// they change, as `FunnelAnalysis.count` does, so nothing is copied.
    public func merge(into other: inout (any DayCounts)?) {
        guard var sum = other as? Self else {
            other = self
            return
        }
        other = nil
        sum.merge(self)
        other = sum
    }
}

/// Who an outcome is about, for an analysis that lists persons.
public struct CountedUnit: Sendable, Hashable {
    /// The person's id (where their ids' links lead), or the group's id.
    public var id: String
    /// Every id merged into the person, theirs first (`ListedPerson.ids`).
    public var ids: [String]

    public init(id: String, ids: [String]) {
        self.id = id
        self.ids = ids
    }
}

/// The analyses every nightly run counts and stores, and the ones a query
/// may ask for by name (`onramp funnel --diagnostics --retention`).
public enum StandardAnalyses {
    /// Every standard analysis, for `funnels`.
    public static func all(_ funnels: [Funnel]) -> [any FunnelAnalysis] {
        [DropOffAnalysis(funnels: funnels), RetentionAnalysis(funnels: funnels)]
    }

    /// The standard analysis named `id`, for `funnels`.
    public static func named(_ id: AnalysisID, for funnels: [Funnel]) -> (any FunnelAnalysis)? {
        all(funnels).first { $0.id == id }
    }
}

extension AnalysisID {
    /// The standard analyses' names: why persons drop off, and retention.
    public static let diagnostics = DropOffAnalysis.id
    public static let retention = RetentionAnalysis.id
}
