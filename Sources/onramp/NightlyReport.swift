import Delivery
import Foundation
import Funnels
import LibPQ
import Notifications
import Projection
import Reports

/// What `onramp report` and `onramp rebuild` do once their options are
/// read: the job, then the report printed and written, the alert posted,
/// and the exit status the findings call for. The commands parse; this runs,
/// and tests call it as the commands do.
struct NightlyReport {
    var mode: ProjectionJob.Mode
    var configuration: FunnelConfiguration
    /// The configuration's file, for what its errors name.
    var configurationSource: String? = nil
    var query: ReportQuery
    var writer: ReportWriter
    /// Where alerts are posted (nil: none), and how often it is tried.
    var notifyURL: String?
    var notifyAttempts = 5
    /// The findings that fail the run.
    var failOnMissedTargets = false
    var failOnRegression = false
    var failOnInstrumentation = false
    var showProgress = true
    /// The report's text (standard output), and what is said beside it (standard error).
    var output: @Sendable (String) -> Void = { print($0, terminator: "") }
    var info: @Sendable (String) -> Void = { Console.info($0) }

    /// What a run did, and the exit status its findings call for (nil: 0).
    struct Ran: Sendable {
        var status: ExitStatus?
        var summary: ProjectionJob.Summary
        /// The audiences' deliveries sent after the run, when an audience delivers.
        var delivered: Deliverer.Summary?

        /// For `--metrics-file` (docs/operations.md, "Metrics").
        var metrics: [JobMetricsText.Value] {
            var values = [
                JobMetricsText.Value("new_events", "Events the run took in since the last run.", summary.newEvents),
                JobMetricsText.Value("events_read", "Events the run read to recompute persons and groups.", summary.eventsRead),
                JobMetricsText.Value("persons_recomputed", "Persons the run recomputed.", summary.personsRecomputed),
                JobMetricsText.Value("groups_recomputed", "Groups the run recomputed.", summary.groupsRecomputed),
                JobMetricsText.Value("windows_closed", "Windows that closed since the last run.", summary.windowsClosed),
                JobMetricsText.Value("cohort_days_rewritten", "Cohort days the run rewrote.", summary.cohortDaysRewritten),
                JobMetricsText.Value("audiences_entered", "Audience entries the run recorded.", summary.audiencesEntered),
                JobMetricsText.Value("audiences_left", "Audience exits the run recorded.", summary.audiencesLeft),
            ]
            if let delivered { values += JobMetricsText.Value.deliveries(delivered) }
            return values
        }
    }

    /// Runs the job and the report; returns what it did and the exit status its findings call for.
    func run(databaseURL: String, now: Int64? = nil) async throws -> Ran {
        // An audience delivering without its secret stops the run before anything is written.
        let deliverer = try Deliverer.checked(configuration)
        var job = ProjectionJob(configuration: configuration, showProgress: showProgress)
        // Not progress: a run that recomputes or removes a funnel says so even when quiet.
        job.announce = info
        let (writer, from, to) = (writer, query.from, query.to)
        let (summary, written) = try await NightlyRun.run(job, mode: mode, query: query, databaseURL: databaseURL, now: now) { run in
            (run.summary, try writer.write(run, from: from, to: to))
        }
        info(
            "\(mode.rawValue): \(summary.newEvents) new events, \(summary.personsRecomputed) persons "
                + (summary.groupsRecomputed > 0 ? "and \(summary.groupsRecomputed) groups " : "") + "recomputed, "
                + "\(summary.windowsClosed) windows closed, \(summary.cohortDaysRewritten) cohort days rewritten")
        output(written.text)
        var delivered: Deliverer.Summary?
        if !deliverer.audiences.isEmpty {
            // The night's audience changes go out now, as `onramp audiences run` sends them between nights.
            let sent = try await ConnectionPool.using(url: databaseURL) { pool in try await deliverer.run(pool) }
            delivered = sent
            info("audiences: \(summary.audiencesEntered) entered, \(summary.audiencesLeft) left; \(sent.line)")
        }
        if mode == .incremental, configuration.archive != nil {
            // The configured horizon: the whole months past it go to the archive, after the night.
            for line in try ArchiveRun.run(configuration, source: configurationSource, databaseURL: databaseURL) { info(line) }
        }
        if let directory = writer.directory {
            info("wrote \(written.files.joined(separator: ", ")) to \(directory.path); open \(directory.appendingPathComponent("index.html").path)")
        }
        if !written.regressions.isEmpty {
            info("regressions:\n" + written.regressions.map { "  " + $0 }.joined(separator: "\n"))
        }
        if !written.instrumentation.isEmpty {
            info("instrumentation:\n" + written.instrumentation.map { "  " + $0 }.joined(separator: "\n"))
        }
        if let notify = notifyURL, let message = written.notification {
            var notifier = Notifier(url: notify)
            notifier.attempts = max(1, notifyAttempts)
            do {
                let tries = try await notifier.post(message) { info($0) }
                info("notified \(Notifier.redacted(notify)) (\(tries == 1 ? "first try" : "after \(tries) tries"))")
            } catch {
                info("notify: could not deliver: \(error)")
                return Ran(status: .undeliveredNotification, summary: summary, delivered: delivered)
            }
        }
        if failOnMissedTargets, !written.missedTargets.isEmpty {
            info("missed targets: \(written.missedTargets.joined(separator: ", "))")
            return Ran(status: .missedTargets, summary: summary, delivered: delivered)
        }
        if failOnInstrumentation, !written.instrumentation.isEmpty { return Ran(status: .instrumentation, summary: summary, delivered: delivered) }
        if failOnRegression, !written.userRegressions.isEmpty { return Ran(status: .regression, summary: summary, delivered: delivered) }
        return Ran(status: nil, summary: summary, delivered: delivered)
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
