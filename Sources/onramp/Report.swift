import ArgumentParser
import LibPQ
import Projection

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

    func run() async throws {
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
}
