import ArgumentParser
import Foundation
import Funnels
import LibPQ
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

    @Option(name: .customLong("time-zone"), help: "IANA time zone for cohort days (default: the configured one).")
    var timeZone: String?

    @Option(help: "table, markdown, csv or json.")
    var format: String = "table"

    @Option(help: "Also write every format and the HTML dashboard (index.html) into this directory.")
    var out: String?

    @Flag(help: "Exit with status 3 when a configured target is missed.")
    var failOnMissedTargets = false

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
        if let timeZone, TimeZone(identifier: timeZone) == nil {
            throw ValidationError("--time-zone '\(timeZone)' is not an IANA time zone (e.g. Europe/Berlin)")
        }
    }

    /// Runs the job, then renders and writes the report; the shared body of `report` and `rebuild`.
    func run(mode: ProjectionJob.Mode, databaseURL: String, configuration options: ConfigurationOptions) async throws {
        let configuration = try options.load()
        let job = ProjectionJob(configuration: configuration, timeZoneOverride: timeZone, showProgress: !quiet)
        let query = ReportQuery(from: from, to: to, funnels: funnels, timeZoneOverride: timeZone)
        let pool = ConnectionPool(url: databaseURL, maxConnections: 1)
        let now = Timestamps.microseconds(Date())
        let outcome = await Result(catching: {
            try await pool.withConnection { c -> (ProjectionJob.Summary, [ReportQuery.FunnelResult]) in
                let summary = try job.run(c, mode: mode, now: now)
                return (summary, try query.results(c, configuration: configuration, now: now))
            }
        })
        await pool.close()
        let (summary, results) = try outcome.get()
        let reports = results.map(\.report)
        Console.info(
            "\(mode.rawValue): \(summary.newEvents) new events, \(summary.personsRecomputed) persons recomputed, "
                + "\(summary.windowsClosed) windows closed, \(summary.cohortDaysRewritten) cohort days rewritten")
        let range = ReportRange(from: from, to: to, generatedAt: Timestamps.format(microseconds: now))
        let chosen = ReportFormat(rawValue: format) ?? .table
        print(chosen.render(reports, range: range), terminator: "")
        if let out {
            let directory = URL(fileURLWithPath: out)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            for format in ReportFormat.allCases {
                try format.render(reports, range: range).write(
                    to: directory.appendingPathComponent(format.fileName), atomically: true, encoding: .utf8)
            }
            let pages = HTMLDashboard(range: range).render(
                results.map { DashboardFunnel(report: $0.report, secondsToComplete: $0.secondsToComplete) })
            for (name, html) in pages {
                try html.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
            }
            Console.info(
                "wrote \(ReportFormat.allCases.map(\.fileName).joined(separator: ", ")) and the HTML dashboard "
                    + "(\(pages.count) pages) to \(directory.path); open \(directory.appendingPathComponent("index.html").path)")
        }
        let missed = reports.flatMap { r in r.targets.filter { !$0.met }.map { "\(r.funnel).\($0.name)" } }
        if failOnMissedTargets, !missed.isEmpty {
            Console.info("missed targets: \(missed.joined(separator: ", "))")
            throw ExitCode(3)
        }
    }
}
