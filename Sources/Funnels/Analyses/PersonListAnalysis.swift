/// The persons behind one number of the report (docs/funnels.md, "The
/// persons behind a number"): everyone in a `PersonCell`, with who they
/// are and how far they got, in the lists' order (`ListedPerson.listedBefore`).
/// Query time counts it like any analysis; the nightly job's
/// `funnel_persons` rows hold the same outcomes, which the SQL functions
/// and `onramp report --persons` select with the same rule.
public struct PersonListAnalysis: FunnelAnalysis {
    public typealias Counts = PersonList
    public let cell: PersonCell
    /// The funnel's required steps (`Funnel.requiredStepIndices`), worked out once.
    private let required: [Int]

    public init(cell: PersonCell, funnel: Funnel) {
        self.cell = cell
        required = funnel.requiredStepIndices
    }

    /// One id per cell: answers of two cells are two answers.
    public var id: AnalysisID { AnalysisID(rawValue: "persons \(cell)") }
    public var readsEveryEvent: Bool { false }
    public var listsPersons: Bool { true }

    /// Without knowing who the person is there is nothing to list.
    public func count(_ outcome: PersonOutcome, in funnel: Funnel, events: [FunnelEvent], into counts: inout PersonList) -> Bool {
        false
    }

    public func count(
        _ outcome: PersonOutcome, of unit: () -> CountedUnit, in funnel: Funnel, events: [FunnelEvent], into counts: inout PersonList
    ) -> Bool {
        guard cell.contains(outcome, required: required) else { return false }
        let who = unit()
        // The day is the counts' key: `persons(of:)` writes it in.
        counts.persons.append(ListedPerson(id: who.id, ids: who.ids, cohortDay: "", outcome: outcome, in: funnel))
        return true
    }

    /// The report carries how many there are; the list is read from the counts (`persons(of:)`).
    public func fill(_ report: inout FunnelReport, funnel: Funnel, tally: FunnelTally, days: [String: PersonList], now: Int64) {
        let total = days.values.reduce(0) { $0 + $1.persons.count }
        report.analyses[id] = .fields([
            .init("step", .number(Double(cell.step))), .init("outcome", .text(cell.outcome.rawValue)), .init("persons", .number(Double(total))),
        ])
    }

    /// Every listed person of the days counted, in the lists' order.
    public func persons(of days: [String: PersonList]) -> [ListedPerson] {
        days.flatMap { day, list in
            list.persons.map { person in
                var person = person
                person.cohortDay = day
                return person
            }
        }.sorted(by: ListedPerson.listedBefore)
    }
}

/// The persons of one cell who started on one cohort day.
public struct PersonList: DayCounts, Hashable {
    public var persons: [ListedPerson] = []

    public init() {}

    public mutating func merge(_ other: PersonList) {
        persons += other.persons
    }

    public mutating func subtract(_ other: PersonList) {
        let leaving = Set(other.persons.map(\.id))
        persons.removeAll { leaving.contains($0.id) }
    }
}
