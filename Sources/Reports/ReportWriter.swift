public import Foundation
import Funnels

/// Where a nightly report goes: one format to standard output, every format
/// and the HTML dashboard into a directory, and what it found (missed
/// targets, regressions, instrumentation), from which the CLI decides the
/// exit status a scheduler sees.
public struct ReportWriter: Sendable {
    public var format: ReportFormat
    /// Also write every format and the dashboard here (created if missing).
    public var directory: URL?

    public init(format: ReportFormat = .table, directory: URL? = nil) {
        self.format = format
        self.directory = directory
    }

    /// What was written.
    public struct Written: Sendable {
        /// The chosen format's text, for standard output.
        public var text: String
        /// Files written into `directory`, by name.
        public var files: [String]
        /// `funnel.target` of every target the report missed.
        public var missedTargets: [String]
        /// One line per regression found, most significant first.
        public var regressions: [String]
        /// Those no instrumentation finding explains: users leaving (what `--fail-on-regression` counts).
        public var userRegressions: [String]
        /// One line per instrumentation finding.
        public var instrumentation: [String]
        /// What `--notify` posts, when there is a regression, an instrumentation finding or a missed target.
        public var notification: String?
    }

    public func write(_ funnels: [DashboardFunnel], range: ReportRange) throws -> Written {
        let reports = funnels.map(\.report)
        var files: [String] = []
        if let directory {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            for format in ReportFormat.allCases {
                try format.render(reports, range: range).write(
                    to: directory.appendingPathComponent(format.fileName), atomically: true, encoding: .utf8)
                files.append(format.fileName)
            }
            for (name, html) in HTMLDashboard(range: range).render(funnels) {
                try html.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
                files.append(name)
            }
        }
        let missed = reports.flatMap { r in r.targets.filter { !$0.met }.map { "\(r.funnel).\($0.name)" } }
        let regressions = RegressionText.all(reports).regressions
        return Written(
            text: format.render(reports, range: range), files: files, missedTargets: missed,
            regressions: regressions.map(RegressionText.line),
            userRegressions: regressions.filter { $0.likelyInstrumentation == nil }.map(RegressionText.line),
            instrumentation: InstrumentationText.all(reports).map(\.sentence),
            notification: AlertNotification.render(reports, range: range))
    }
}
