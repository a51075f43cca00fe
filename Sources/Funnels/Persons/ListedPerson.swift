/// One person of a cell's list (`PersonCell`), as every surface prints it:
/// who they are, when they started and how far they got.
public struct ListedPerson: Sendable, Hashable, Codable {
    /// The person's id (where their ids' links lead), or the group's id.
    public var id: String
    /// Every id merged into the person, theirs first, the rest in order: user
    /// ids and anonymous ids are one namespace (an alias's previous id may be
    /// either). A group's: its id.
    public var ids: [String]
    /// The local day of their first step-1 event (`YYYY-MM-DD`).
    public var cohortDay: String
    /// Microseconds: the start of the chain their level was reached along.
    public var chainStart: Int64?
    /// The report's row of the last required step they reached, from 1, and its name as the report prints it.
    public var lastStep: Int
    public var lastStepName: String
    /// Microseconds: when they reached it, along the chain.
    public var lastStepTime: Int64?
    /// Values of the funnel's breakdowns, aligned with `Funnel.breakdowns`.
    public var breakdown: [String]

    public init(
        id: String, ids: [String], cohortDay: String, chainStart: Int64?, lastStep: Int, lastStepName: String, lastStepTime: Int64?,
        breakdown: [String]
    ) {
        self.id = id
        self.ids = ids
        self.cohortDay = cohortDay
        self.chainStart = chainStart
        self.lastStep = lastStep
        self.lastStepName = lastStepName
        self.lastStepTime = lastStepTime
        self.breakdown = breakdown
    }

    /// A listed person from their outcome in `funnel` (started, not excluded).
    public init(id: String, ids: [String], cohortDay: String, outcome: PersonOutcome, in funnel: Funnel) {
        let required = funnel.requiredStepIndices
        let last = required.isEmpty ? 0 : required[max(0, min(outcome.level, required.count) - 1)]
        self.init(
            id: id, ids: ids, cohortDay: cohortDay, chainStart: outcome.chainStartTime, lastStep: last + 1, lastStepName: funnel.rowName(last),
            lastStepTime: outcome.stepTimes.indices.contains(last) ? outcome.stepTimes[last] : nil,
            breakdown: funnel.breakdowns.map { outcome.breakdown[$0] ?? PersonOutcome.missingBreakdownValue })
    }

    /// The lists' order: by when the last required step was reached, newest
    /// first, ties by id (the text's bytes, as PostgreSQL's "C" collation).
    public static func listedBefore(_ a: ListedPerson, _ b: ListedPerson) -> Bool {
        let (x, y) = (a.lastStepTime ?? .min, b.lastStepTime ?? .min)
        if x != y { return x > y }
        return a.id.utf8.lexicographicallyPrecedes(b.id.utf8)
    }
}
