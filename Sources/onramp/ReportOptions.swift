import ArgumentParser
import Foundation
import Funnels
import LibPQ
import Notifications
import Projection
import Reports

/// What `report` and `rebuild` share: which funnels and days, how to render.
struct ReportOptions: ParsableArguments {
    @Option(help: "First cohort day, YYYY-MM-DD (inclusive; default: all).")
    var from: String?

    @Option(help: "Last cohort day, YYYY-MM-DD (inclusive; default: all).")
    var to: String?

    @Option(name: .customLong("funnel"), help: "A funnel to report (repeatable; default: all configured).")
    var funnels: [String] = []

    @Option(name: .customLong("time-zone"), help: "IANA time zone to cut this report's cohort days in (default: the configured one); the stored days stay in the configured zone.")
    var timeZone: String?

    @Option(help: "table, markdown, csv or json.")
    var format: String = "table"

    @Option(help: "Also write every format and the HTML dashboard (index.html) into this directory.")
    var out: String?

    @Flag(help: "Exit with status 3 when a configured target is missed.")
    var failOnMissedTargets = false

    @Flag(help: "Exit with status 4 when a regression not explained by broken instrumentation is found (3 and 6 win).")
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

    func validate() throws {
        guard ReportFormat(rawValue: format) != nil else {
            throw ValidationError("--format must be one of table, markdown, csv, json (got '\(format)')")
        }
        for (name, day) in [("--from", from), ("--to", to)] {
            if let day, Timestamps.parse(day + " 00:00:00+00") == nil {
                throw ValidationError("\(name) must be a day as YYYY-MM-DD (got '\(day)')")
            }
        }
        if let notify = notifyURL, !Notifier.accepts(notify) {
            throw ValidationError("--notify (or $ONRAMP_NOTIFY_URL) must be an http(s) URL such as https://hooks.slack.com/services/…")
        }
        if let timeZone, TimeZone(identifier: timeZone) == nil {
            throw ValidationError("--time-zone '\(timeZone)' is not an IANA time zone (e.g. Europe/Berlin)")
        }
    }

    /// Runs the job, then writes the report; the shared body of `report` and `rebuild`.
    func run(mode: ProjectionJob.Mode, databaseURL: String, configuration options: ConfigurationOptions) async throws {
        var job = ProjectionJob(configuration: try options.load(), showProgress: !quiet)
        // Not progress: a run that recomputes or removes a funnel says so even when quiet.
        job.announce = { Console.info($0) }
        let query = ReportQuery(from: from, to: to, funnels: funnels, timeZoneOverride: timeZone)
        let writer = ReportWriter(format: ReportFormat(rawValue: format) ?? .table, directory: out.map(URL.init(fileURLWithPath:)))
        let (from, to) = (from, to)
        let (summary, written) = try await NightlyRun.run(job, mode: mode, query: query, databaseURL: databaseURL) { run in
            (run.summary, try writer.write(run, from: from, to: to))
        }
        Console.info(
            "\(mode.rawValue): \(summary.newEvents) new events, \(summary.personsRecomputed) persons "
                + (summary.groupsRecomputed > 0 ? "and \(summary.groupsRecomputed) groups " : "") + "recomputed, "
                + "\(summary.windowsClosed) windows closed, \(summary.cohortDaysRewritten) cohort days rewritten")
        print(written.text, terminator: "")
        if let directory = writer.directory {
            Console.info(
                "wrote \(written.files.joined(separator: ", ")) to \(directory.path); open \(directory.appendingPathComponent("index.html").path)")
        }
        if !written.regressions.isEmpty {
            Console.info("regressions:\n" + written.regressions.map { "  " + $0 }.joined(separator: "\n"))
        }
        if !written.instrumentation.isEmpty {
            Console.info("instrumentation:\n" + written.instrumentation.map { "  " + $0 }.joined(separator: "\n"))
        }
        if let notify = notifyURL, let message = written.notification {
            var notifier = Notifier(url: notify)
            notifier.attempts = max(1, notifyAttempts)
            do {
                let tries = try await notifier.post(message) { Console.info($0) }
                Console.info("notified \(Notifier.redacted(notify)) (\(tries == 1 ? "first try" : "after \(tries) tries"))")
            } catch {
                Console.info("notify: could not deliver: \(error)")
                throw ExitCode(ReportWriter.undeliveredNotificationExitStatus)
            }
        }
        if failOnMissedTargets, !written.missedTargets.isEmpty {
            Console.info("missed targets: \(written.missedTargets.joined(separator: ", "))")
            throw ExitCode(ReportWriter.missedTargetsExitStatus)
        }
        if failOnInstrumentation, !written.instrumentation.isEmpty {
            throw ExitCode(ReportWriter.instrumentationExitStatus)
        }
        if failOnRegression, !written.userRegressions.isEmpty {
            throw ExitCode(ReportWriter.regressionExitStatus)
        }
    }
}

extension ReportWriter {
    /// Writes a nightly run's results, the cohort days `from`…`to` (nil: open-ended);
    /// what `report`, `rebuild` and `demo` print and write.
    func write(_ run: NightlyRun.Outcome, from: String?, to: String?) throws -> Written {
        try write(
            run.results.map { DashboardFunnel(report: $0.report, secondsToComplete: $0.secondsToComplete) },
            range: ReportRange(from: from, to: to, generatedAt: Timestamps.format(microseconds: run.now)))
    }
}
