import Foundation
public import Funnels

/// A cell's persons as `onramp funnel --persons` and `onramp report
/// --persons` print them: a table for a person to read, CSV and JSON for
/// tools. CSV and JSON are written person by person as they come, so a list
/// of any length goes out without being held; a table lines its columns up,
/// so it holds the persons it shows.
public struct PersonListText {
    public enum Format: String, CaseIterable, Sendable {
        case table, csv, json
    }

    /// What the list is of.
    public struct About: Sendable {
        public var funnel: String
        public var app: String
        public var cell: PersonCell
        /// The cell's row as the report names it.
        public var stepName: String
        /// A funnel counting groups lists groups (`group_id`).
        public var groups: Bool
        public var breakdowns: [String]
        /// Trait paths asked (`--traits`), as given.
        public var traits: [String]
        /// The clock `seconds_since_last_step` is taken at (microseconds).
        public var asOf: Int64

        /// A list of `cell` of `funnel`, with the `traits` asked, at `asOf`.
        public init(funnel: Funnel, cell: PersonCell, traits: [String], asOf: Int64) {
            self.funnel = funnel.name
            app = funnel.app
            self.cell = cell
            stepName = funnel.rowName(cell.step - 1)
            groups = funnel.aggregateBy == .group
            breakdowns = funnel.breakdowns
            self.traits = traits
            self.asOf = asOf
        }
    }

    public let format: Format
    public let about: About
    private var tableRows: [[String]] = []
    private var written = 0

    public init(format: Format, about: About) {
        self.format = format
        self.about = about
    }

    private var idColumn: String { about.groups ? "group_id" : "person_id" }

    /// The columns, in order: CSV's header, the table's.
    public var columns: [String] {
        [idColumn, "ids", "cohort_day", "chain_start", "last_step", "last_step_name", "last_step_time", "seconds_since_last_step"]
            + about.breakdowns + about.traits
    }

    /// What comes before the first person.
    public func start() -> String {
        switch format {
        case .table: return ""
        case .csv: return columns.map(Formatting.csvField).joined(separator: ",") + "\n"
        case .json:
            var head = JSON.object([
                ("funnel", .string(about.funnel)), ("app", .string(about.app)), ("step", .number(Double(about.cell.step))),
                ("step_name", .string(about.stepName)), ("outcome", .string(about.cell.outcome.rawValue)),
                ("breakdown_value", about.cell.breakdown.map { .object([("path", .string($0.path)), ("value", .string($0.value))]) } ?? .null),
                ("as_of", .string(Formatting.instant(about.asOf))),
            ]).serialized()
            head.removeLast()  // the object goes on with the persons
            return head + ",\"" + (about.groups ? "groups" : "persons") + "\":["
        }
    }

    /// One person (`traits`: path as asked -> value), as text to write now.
    public mutating func add(_ person: ListedPerson, traits: [String: String] = [:]) -> String {
        defer { written += 1 }
        let since = person.lastStepTime.map { Double(about.asOf - $0) / 1_000_000 }
        switch format {
        case .table:
            tableRows.append(
                [person.id, person.ids.joined(separator: " "), person.cohortDay, person.chainStart.map(Formatting.minute) ?? "",
                 "\(person.lastStep)", person.lastStepName, person.lastStepTime.map(Formatting.minute) ?? "", Formatting.duration(since)]
                    + person.breakdown + about.traits.map { traits[$0] ?? "" })
            return ""
        case .csv:
            let fields = [
                person.id, JSON.array(person.ids.map(JSON.string)).serialized(), person.cohortDay, person.chainStart.map(Formatting.instant) ?? "",
                "\(person.lastStep)", person.lastStepName, person.lastStepTime.map(Formatting.instant) ?? "", since.map { "\($0)" } ?? "",
            ] + person.breakdown + about.traits.map { traits[$0] ?? "" }
            return fields.map(Formatting.csvField).joined(separator: ",") + "\n"
        case .json:
            var fields: [(String, JSON)] = [
                (idColumn, .string(person.id)), ("ids", .array(person.ids.map(JSON.string))), ("cohort_day", .string(person.cohortDay)),
                ("chain_start", person.chainStart.map { .string(Formatting.instant($0)) } ?? .null), ("last_step", .number(Double(person.lastStep))),
                ("last_step_name", .string(person.lastStepName)), ("last_step_time", person.lastStepTime.map { .string(Formatting.instant($0)) } ?? .null),
                ("seconds_since_last_step", JSON.optional(since)),
                ("breakdown", .object(zip(about.breakdowns, person.breakdown).map { ($0, .string($1)) })),
            ]
            if !about.traits.isEmpty { fields.append(("traits", .object(about.traits.map { ($0, traits[$0].map(JSON.string) ?? .null) }))) }
            return (written > 0 ? "," : "") + JSON.object(fields).serialized()
        }
    }

    /// What comes after the last person: `total` persons are in the cell, the ones written of them first.
    public func finish(total: Int) -> String {
        let unit = about.groups ? "groups" : "persons"
        let what = "\(about.funnel), \(about.cell.outcome.rawValue) at step \(about.cell.step) (\(about.stepName))"
            + (about.cell.breakdown.map { ", \($0.path)=\($0.value)" } ?? "")
        switch format {
        case .csv: return ""
        case .json: return "],\"total\":\(total)}\n"
        case .table:
            let out = "\(what): \(total) \(unit)" + (written < total ? ", the \(written) most recent shown (--limit, or --format csv for all)" : "") + "\n"
            guard !tableRows.isEmpty else { return out }
            let header = columns.map { $0 == "seconds_since_last_step" ? "since_last_step" : $0 }
            return out + Formatting.columns([header] + tableRows)
        }
    }

}
