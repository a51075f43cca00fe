import ArgumentParser
import Foundation
import Funnels
import LibPQ
import Projection
import Reports

/// `onramp report`: the incremental nightly job, then the report.
struct Report: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Fold new events into the funnel tables and print the report (run it nightly).")

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var configuration: ConfigurationOptions
    @OptionGroup var report: ReportOptions

    @Flag(help: "Only say which funnels this configuration would recompute from the whole log or remove, and why; write nothing.")
    var dryRun = false

    @OptionGroup var list: PersonsOptions

    func validate() throws {
        guard list.asked else {
            try report.range.check(formats: ReportOptions.formats)
            return
        }
        try list.checkFormat(report.range.format)
        guard report.funnels.count == 1 else { throw ValidationError("--persons and --paths-after are about one funnel: give one --funnel NAME") }
        if dryRun { throw ValidationError("--persons and --paths-after read the stored tables and write nothing already: leave out --dry-run") }
    }

    func run() async throws {
        if list.asked {
            try printStored()
            return
        }
        guard dryRun else {
            try await report.run(mode: .incremental, databaseURL: try database.resolvedURL(), configuration: configuration)
            return
        }
        let job = ProjectionJob(configuration: try configuration.load(), showProgress: false)
        let changes = try await ConnectionPool.using(url: try database.resolvedURL()) { pool in
            try await pool.withConnection { try job.preview($0) }
        }
        for line in changes.lines(conditional: true) { print(line) }
        if changes.isEmpty {
            print("no funnel would be recomputed or removed: the stored rows of all \(changes.unchanged.count) were built from this configuration")
        } else if !changes.unchanged.isEmpty {
            print("unchanged (incremental): \(changes.unchanged.joined(separator: ", "))")
        }
    }

    /// `--persons` and `--paths-after`: a cell's persons, or where those
    /// who dropped went, as of the last run, from the stored tables; the job
    /// does not run and nothing is written.
    private func printStored() throws {
        let configured = try configuration.load()
        let name = report.funnels[0]
        guard let funnel = configured.funnels.first(where: { $0.name == name }) else {
            throw ValidationError("--funnel: no funnel '\(name)' in the configuration (its funnels: \(configured.funnels.map(\.name).joined(separator: ", ")))")
        }
        let url = try database.resolvedURL()
        if let paths = try list.paths(in: funnel) {
            guard funnel.aggregateBy == .person else {
                throw ValidationError("--paths-after of a funnel counting groups is answered from the log: onramp funnel --paths-after")
            }
            let counts = try PersonsOptions.refusingBadInput(flag: "--paths-after") {
                try StoredPaths.count(try Connection.connect(url), funnel: funnel, paths: paths)
            }
            try list.printPaths(paths, days: ["": counts], funnel: funnel, format: report.range.format) {
                HTMLDashboard(range: ReportRange(from: nil, to: nil, generatedAt: Timestamps.format(microseconds: Timestamps.microseconds(Date())))).paths($0)
            }
            return
        }
        guard let cell = try list.cell(in: funnel) else { return }
        let rows = try Connection.connect(url)
        var traits: Connection?
        var printer = list.printer(
            format: try list.format(report.range.format), funnel: funnel, cell: cell, asOf: Timestamps.microseconds(Date())
        ) {
            // The rows stream on their own connection: traits are read beside it.
            if let traits { return traits }
            let opened = try Connection.connect(url)
            traits = opened
            return opened
        }
        let total = try PersonsOptions.refusingBadInput(flag: "--persons") { try StoredPersons.forEach(rows, funnel: funnel, cell: cell) { try printer.add($0) } }
        try printer.finish(total: total)
    }
}
