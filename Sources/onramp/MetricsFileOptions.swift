import ArgumentParser
import Delivery
import Foundation
import Reports

/// `--metrics-file FILE`: a batch command leaves how its run ended and what
/// it did there, in Prometheus's text format, for node_exporter's textfile
/// collector (docs/operations.md, "Metrics"). Written whole to a file
/// beside it, then renamed, so the collector never reads half a file; on
/// failure too, keeping the last success the file said.
struct MetricsFileOptions: ParsableArguments {
    @Option(help: "Write the run's outcome and counts here for node_exporter's textfile collector (a .prom file of this job's own).")
    var metricsFile: String?

    /// Runs `body` as `job`, then writes the file (when asked) with what
    /// `body` returned it did, and returns or rethrows as `body` did.
    func recording(job: String, _ body: () async throws -> [JobMetricsText.Value]) async throws {
        let started = Date()
        var values: [JobMetricsText.Value] = []
        var failure: (any Error)?
        do {
            values = try await body()
        } catch let finished as Finished {
            values = finished.values
            failure = finished.exit
        } catch {
            failure = error
        }
        if let metricsFile {
            let status = failure.map(Self.exitStatus(of:)) ?? 0
            let previous = (try? String(contentsOfFile: metricsFile, encoding: .utf8)).flatMap { JobMetricsText.lastSuccess(in: $0, job: job) }
            var text = JobMetricsText(
                job: job, startedAt: started.timeIntervalSince1970, durationSeconds: Date().timeIntervalSince(started), exitStatus: status,
                lastSuccessAt: status == 0 ? started.timeIntervalSince1970 : previous)
            text.values = values
            do {
                try Self.write(text.render(), to: metricsFile)
            } catch {
                Console.info("--metrics-file: cannot write \(metricsFile): \(error.localizedDescription)")
                if failure == nil { throw ExitCode.failure }
            }
        }
        if let failure { throw failure }
    }

    /// A run that did its work and ends with a status other than 0 (a
    /// finding that fails it): what it did is written all the same.
    struct Finished: Error {
        var exit: ExitCode
        var values: [JobMetricsText.Value]
    }

    /// The status the process exits with for `error`, as ArgumentParser sets it.
    static func exitStatus(of error: any Error) -> Int32 {
        if let exit = error as? ExitCode { return exit.rawValue }
        if error is ValidationError { return ExitCode.validationFailure.rawValue }
        return ExitCode.failure.rawValue
    }

    private static func write(_ text: String, to path: String) throws {
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(getpid()).tmp")
        try Data(text.utf8).write(to: temporary)
        guard rename(temporary.path, path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: temporary)
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: reason])
        }
    }
}

extension JobMetricsText.Value {
    /// What the audiences' deliveries after a run sent.
    static func deliveries(_ sent: Deliverer.Summary) -> [Self] {
        [
            Self("deliveries_sent", "Audience changes delivered to their receivers.", sent.delivered),
            Self("deliveries_failed", "Audience changes whose delivery failed (to be retried).", sent.failed),
            Self("deliveries_dead_lettered", "Audience changes dead-lettered after their last attempt.", sent.dead),
        ]
    }
}
