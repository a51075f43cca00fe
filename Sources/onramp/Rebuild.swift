import ArgumentParser
import Projection

/// `onramp rebuild`: recompute every funnel table from the whole log.
struct Rebuild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rebuild",
        abstract: "Recompute all funnel tables from the event log (same result as the incremental runs).")

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var configuration: ConfigurationOptions
    @OptionGroup var report: ReportOptions

    func validate() throws {
        try report.range.check(formats: ReportOptions.formats)
    }

    func run() async throws {
        try await report.run(mode: .rebuild, databaseURL: try database.resolvedURL(), configuration: configuration)
    }
}
