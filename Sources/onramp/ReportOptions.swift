import ArgumentParser
import Foundation
import Notifications
import Projection
import Reports

/// What `report` and `rebuild` share besides the days and format: which
/// funnels, where else to write, when to alert and which findings fail the run.
struct ReportOptions: ParsableArguments {
    @OptionGroup var range: RangeOptions

    @Option(name: .customLong("funnel"), help: "A funnel to report (repeatable; default: all configured).")
    var funnels: [String] = []

    @Option(help: "Also write every format and the HTML dashboard (index.html) into this directory.")
    var out: String?

    @Flag(help: "Exit with status 3 when a configured target is missed.")
    var failOnMissedTargets = false

    @Flag(help: "Exit with status 4 when a regression not explained by broken instrumentation is found (3, 5 and 6 win).")
    var failOnRegression = false

    @Flag(help: "Exit with status 6 when the report finds broken instrumentation (after 3, before 4).")
    var failOnInstrumentation = false

    @Option(help: ArgumentHelp(
        "POST one JSON message (`text` for Slack/Mattermost, plus the lists) here when a regression, broken instrumentation or a missed target is found (default: $ONRAMP_NOTIFY_URL).",
        discussion: "Retried with backoff; when it cannot be delivered the report is still written and the exit status is 5. Logs show only its scheme and host: a webhook's path is its secret, so prefer the environment variable to the command line."))
    var notify: String?

    /// `--notify`, else `$ONRAMP_NOTIFY_URL`.
    var notifyURL: String? {
        notify ?? ProcessInfo.processInfo.environment["ONRAMP_NOTIFY_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    @Option(help: .hidden)
    var notifyAttempts: Int = 5

    @Flag(help: "No progress output.")
    var quiet = false

    @OptionGroup var metrics: MetricsFileOptions

    /// The report's formats: each command checks them, as `--persons` and
    /// `--paths-after` print a list or a tree in formats of their own.
    static let formats = ReportFormat.allCases.map(\.rawValue)

    func validate() throws {
        if let notify = notifyURL, !Notifier.accepts(notify) {
            throw ValidationError("--notify (or $ONRAMP_NOTIFY_URL) must be an http(s) URL such as https://hooks.slack.com/services/…")
        }
    }

    /// The workflow these options ask for, in `mode`.
    func nightlyReport(mode: ProjectionJob.Mode, configuration: ConfigurationOptions) throws -> NightlyReport {
        NightlyReport(
            mode: mode, configuration: try configuration.load(), configurationSource: configuration.config,
            query: ReportQuery(from: range.from, to: range.to, funnels: funnels, timeZoneOverride: range.timeZone),
            writer: ReportWriter(format: ReportFormat(rawValue: range.format) ?? .table, directory: out.map(URL.init(fileURLWithPath:))),
            notifyURL: notifyURL, notifyAttempts: notifyAttempts, failOnMissedTargets: failOnMissedTargets,
            failOnRegression: failOnRegression, failOnInstrumentation: failOnInstrumentation, showProgress: !quiet)
    }

    /// Runs the workflow in `mode`: the shared body of `report` and `rebuild`.
    func run(mode: ProjectionJob.Mode, databaseURL: String, configuration: ConfigurationOptions) async throws {
        try await metrics.recording(job: mode == .rebuild ? "rebuild" : "report") {
            let ran = try await nightlyReport(mode: mode, configuration: configuration).run(databaseURL: databaseURL)
            if let status = ran.status { throw MetricsFileOptions.Finished(exit: ExitCode(status.rawValue), values: ran.metrics) }
            return ran.metrics
        }
    }
}
