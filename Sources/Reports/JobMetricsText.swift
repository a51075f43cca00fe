import Foundation

/// What a batch command (`onramp report`, `rebuild`, `audiences run`,
/// `privacy erase`) leaves for Prometheus, in its text format, for
/// node_exporter's textfile collector (docs/operations.md, "Metrics"):
/// how the last run ended and what it did, and when one last succeeded.
public struct JobMetricsText: Sendable, Equatable {
    /// The command, as the `command` label gives it: `report`, `rebuild`, `audiences_run`, `privacy_erase`
    /// (not `job`, which Prometheus gives the scrape job, node_exporter's).
    public var job: String
    /// Seconds since the epoch the run started.
    public var startedAt: Double
    public var durationSeconds: Double
    /// The process's exit status (0: success).
    public var exitStatus: Int32
    /// When a run of this job last succeeded: this one, or the one the previous file says.
    public var lastSuccessAt: Double?
    /// One thing the run did: a series (named without the `onramp_job_` prefix), its help text and value.
    public struct Value: Sendable, Equatable {
        public var name: String
        public var help: String
        public var value: Double

        public init(_ name: String, _ help: String, _ value: Int) {
            self.name = name
            self.help = help
            self.value = Double(value)
        }
    }

    /// What the run did, in order.
    public var values: [Value] = []

    public init(job: String, startedAt: Double, durationSeconds: Double, exitStatus: Int32, lastSuccessAt: Double?) {
        self.job = job
        self.startedAt = startedAt
        self.durationSeconds = durationSeconds
        self.exitStatus = exitStatus
        self.lastSuccessAt = lastSuccessAt
    }

    /// The file's text: every series a gauge labelled with the command.
    public func render() -> String {
        var lines: [String] = []
        func gauge(_ name: String, _ help: String, _ value: Double) {
            let series = "onramp_job_" + name
            lines.append("# HELP \(series) \(help)")
            lines.append("# TYPE \(series) gauge")
            lines.append("\(series){command=\"\(job)\"} \(Self.number(value))")
        }
        gauge("success", "Whether the job's last run succeeded (1) or failed (0).", exitStatus == 0 ? 1 : 0)
        gauge("exit_status", "The exit status of the job's last run.", Double(exitStatus))
        gauge("last_run_timestamp_seconds", "When the job's last run started, in seconds since the epoch.", startedAt)
        if let lastSuccessAt {
            gauge("last_success_timestamp_seconds", "When a run of the job last succeeded, in seconds since the epoch.", lastSuccessAt)
        }
        gauge("duration_seconds", "How long the job's last run took.", durationSeconds)
        for value in values { gauge(value.name, value.help, value.value) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The last success a file of this job's says, if any.
    public static func lastSuccess(in text: String, job: String) -> Double? {
        let prefix = "onramp_job_last_success_timestamp_seconds{command=\"\(job)\"} "
        for line in text.split(separator: "\n") where line.hasPrefix(prefix) {
            return Double(line.dropFirst(prefix.count))
        }
        return nil
    }

    static func number(_ value: Double) -> String {
        if value.isFinite, value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(format: "%.6f", value)
    }
}
