import Foundation
import Funnels
public import LibPQ

/// `onramp report` and `onramp rebuild` as one call: the job runs and
/// commits, then the report is read, in the same session at the same `now`,
/// under the job's lock all along, so no other run commits in between.
public enum NightlyRun {
    public struct Outcome: Sendable {
        public var summary: ProjectionJob.Summary
        public var results: [ReportQuery.FunnelResult]
        /// The run's clock, microseconds since the Unix epoch.
        public var now: Int64
    }

    public static func run(
        _ job: ProjectionJob, mode: ProjectionJob.Mode, query: ReportQuery, databaseURL: String, now: Int64? = nil
    ) async throws -> Outcome {
        try await run(job, mode: mode, query: query, databaseURL: databaseURL, now: now) { $0 }
    }

    /// `run`, then `render` (what the command prints and writes) given its
    /// outcome; `first`, when given, runs on the session before the job,
    /// holding its lock (an erasure, docs/privacy.md).
    public static func run<Rendered: Sendable>(
        _ job: ProjectionJob, mode: ProjectionJob.Mode, query: ReportQuery, databaseURL: String, now: Int64? = nil,
        first: (@Sendable (Connection) throws -> Void)? = nil, render: @escaping @Sendable (Outcome) throws -> Rendered
    ) async throws -> Rendered {
        let now = now ?? Timestamps.microseconds(Date())
        let pool = ConnectionPool(url: databaseURL, maxConnections: 1)
        let outcome: Result<Outcome, any Error>
        do {
            outcome = .success(try await pool.withConnection { c in
                try ProjectionJob.locked(c) {
                    try first?(c)
                    let summary = try job.run(c, mode: mode, now: now)
                    var results = try query.results(c, configuration: job.configuration, now: now, analyses: job.analyses)
                    let recomputed = Dictionary(summary.definitions.recompute.map { ($0.funnel, $0) }) { first, _ in first }
                    for index in results.indices {
                        results[index].report.recomputed = recomputed[results[index].report.funnel].map {
                            FunnelReport.Recomputation(reason: $0.reason, events: $0.events)
                        }
                    }
                    // Only a report over every day, cut as the job cuts them, speaks for the funnel.
                    if query.from == nil && query.to == nil && query.timeZoneOverride == nil {
                        try c.transaction { c in
                            try RegressionTable.write(
                                c, reports: results.map(\.report), configured: job.configuration.funnels.map(\.name), now: now)
                        }
                    }
                    return Outcome(summary: summary, results: results, now: now)
                }
            })
        } catch {
            outcome = .failure(error)
        }
        await pool.close()
        return try render(try outcome.get())
    }
}
