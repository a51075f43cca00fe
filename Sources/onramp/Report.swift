import ArgumentParser
import Projection

/// `onramp report`: the incremental nightly job, then the report.
struct Report: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Fold new events into the funnel tables and print the report (run it nightly).")

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var configuration: ConfigurationOptions
    @OptionGroup var report: ReportOptions

    func run() async throws {
        try await report.run(mode: .incremental, databaseURL: try database.resolvedURL(), configuration: configuration)
    }
}
