import ArgumentParser
import Foundation
import Funnels
import LibPQ
import LogReading
import Reports

/// What `funnel` and `report` share to list the persons behind one number
/// of a report (docs/funnels.md, "The persons behind a number").
struct PersonsOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "List the persons behind one number instead of the report: OUTCOME:STEP, e.g. dropped:3.",
        discussion: "OUTCOME is reached, converted, dropped or in_progress; STEP the report's row (from 1, optional steps included)."))
    var persons: String?

    @Option(name: .customLong("breakdown-value"), help: "With --persons: only those with this breakdown value, PATH=VALUE (e.g. context.os.name=iOS).")
    var breakdownValue: String?

    @Option(help: "With --persons: also their latest identify traits, comma-separated paths (e.g. traits.email,plan).")
    var traits: String?

    @Option(help: "With --persons: list at most this many, the most recent first (default: 50 in a table, all in csv and json).")
    var limit: Int?

    @Option(name: .customLong("paths-after"), help: "Where those who dropped at this step went next, instead of the report: a tree of up to 3 levels.")
    var pathsAfter: Int?

    @Option(help: "With --paths-after: follow the paths this long after the step (e.g. 1h, 2d; default: to the window's end).")
    var horizon: String?

    static let formats = PersonListText.Format.allCases.map(\.rawValue)

    func validate() throws {
        if persons == nil, breakdownValue != nil || traits != nil || limit != nil {
            throw ValidationError("--breakdown-value, --traits and --limit go with --persons OUTCOME:STEP")
        }
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1 (got \(limit))") }
        if persons != nil, pathsAfter != nil { throw ValidationError("--persons and --paths-after are two questions: ask one at a time") }
        if horizon != nil, pathsAfter == nil { throw ValidationError("--horizon goes with --paths-after STEP") }
        if let horizon, WindowDuration.seconds(from: horizon) == nil {
            throw ValidationError("--horizon must be a duration such as 30m, 6h or 2d (got '\(horizon)')")
        }
    }

    /// Whether a list or a tree is asked instead of the report.
    var asked: Bool { persons != nil || pathsAfter != nil }

    /// The paths asked of `funnel`; nil when none are.
    func paths(in funnel: Funnel) throws -> PathsAnalysis? {
        guard let pathsAfter else { return nil }
        let horizon = self.horizon.flatMap(WindowDuration.seconds).map { $0 * 1_000_000 }
        return try Self.refusingBadInput(flag: "--paths-after") { try PathsAnalysis.checked(step: pathsAfter, horizon: horizon, funnel: funnel) }
    }

    /// Prints the tree of `paths` from what it counted (`days`); `html`
    /// draws it on a dashboard page.
    func printPaths(
        _ paths: PathsAnalysis, days: [String: PathCounts], funnel: Funnel, format: String, html: (DashboardPaths) -> String
    ) throws {
        let tree = paths.tree(PathCounts(adding: days.values))
        let about = PathTreeText.About(funnel, paths: paths)
        let text = switch try pathsFormat(format) {
        case .table: PathTreeText.table(tree, about: about)
        case .json: PathTreeText.json(tree, about: about)
        case .html: html(DashboardPaths(tree: tree, about: about))
        }
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    var traitPaths: [String] {
        (traits ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The cell asked of `funnel`; nil when no list is asked.
    func cell(in funnel: Funnel) throws -> PersonCell? {
        guard let persons else { return nil }
        return try Self.refusingBadInput(flag: "--persons") { try PersonCell.parse(persons, breakdownValue: breakdownValue, in: funnel) }
    }

    /// Checks the output format for the list or the tree asked.
    func checkFormat(_ text: String) throws {
        if pathsAfter != nil { _ = try pathsFormat(text) } else { _ = try format(text) }
    }

    /// Checks the output format for a tree.
    func pathsFormat(_ text: String) throws -> PathTreeText.Format {
        guard let format = PathTreeText.Format(rawValue: text) else {
            throw ValidationError("--format with --paths-after must be one of \(PathTreeText.Format.allCases.map(\.rawValue).joined(separator: ", ")) (got '\(text)')")
        }
        return format
    }

    /// Checks the output format for a list.
    func format(_ text: String) throws -> PersonListText.Format {
        guard let format = PersonListText.Format(rawValue: text) else {
            throw ValidationError("--format with --persons must be one of \(Self.formats.joined(separator: ", ")) (got '\(text)')")
        }
        return format
    }

    /// Runs `body`; a cell that cannot be listed is said on stderr, naming
    /// what was wrong, and the command exits with status 2 having written
    /// nothing on stdout (a function's refusal arrives as SQLSTATE 22023).
    static func refusingBadInput<T>(flag: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as PersonCellError {
            let message = "\(error)"
            Console.info("error: " + (message.hasPrefix("--") ? message : "\(flag): \(message)"))
            throw ExitCode(2)
        } catch let error as PostgresError where error.sqlState == "22023" {
            Console.info("error: \(error.message)")
            throw ExitCode(2)
        }
    }

    /// Writes a list as its persons come: `traits` reads a batch's traits
    /// (nil: none asked). CSV and JSON go out batch by batch; a table at the end.
    struct Printer {
        var text: PersonListText
        let limit: Int?
        let traits: (([ListedPerson]) throws -> [String: [String: String]])?
        private var pending: [ListedPerson] = []
        private var shown = 0
        private var started = false

        init(text: PersonListText, limit: Int?, traits: (([ListedPerson]) throws -> [String: [String: String]])?) {
            self.text = text
            self.limit = limit ?? (text.format == .table ? 50 : nil)
            self.traits = traits
        }

        mutating func add(_ person: ListedPerson) throws {
            begin()
            guard limit.map({ shown < $0 }) ?? true else { return }
            shown += 1
            pending.append(person)
            if pending.count >= 500 { try flush() }
        }

        mutating func finish(total: Int) throws {
            begin()
            try flush()
            write(text.finish(total: total))
        }

        /// What comes before the first person, written once.
        private mutating func begin() {
            guard !started else { return }
            started = true
            write(text.start())
        }

        private mutating func flush() throws {
            let found = try traits?(pending) ?? [:]
            for person in pending { write(text.add(person, traits: found[person.id] ?? [:])) }
            pending.removeAll(keepingCapacity: true)
        }

        private func write(_ out: String) {
            if !out.isEmpty { FileHandle.standardOutput.write(Data(out.utf8)) }
        }
    }

    /// A printer for `cell` of `funnel`, its traits read on `traitsConnection`.
    func printer(
        format: PersonListText.Format, funnel: Funnel, cell: PersonCell, asOf: Int64, traitsConnection: @escaping () throws -> Connection
    ) -> Printer {
        let paths = traitPaths
        let about = PersonListText.About(funnel: funnel, cell: cell, traits: paths, asOf: asOf)
        let groups = funnel.aggregateBy == .group
        let traits: (([ListedPerson]) throws -> [String: [String: String]])? = paths.isEmpty ? nil : { batch in
            try PersonTraits.read(try traitsConnection(), app: funnel.app, persons: batch, paths: paths, groups: groups)
        }
        return Printer(text: PersonListText(format: format, about: about), limit: limit, traits: traits)
    }
}
