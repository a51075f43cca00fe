import Foundation
import Funnels
import LibPQ
import NIOConcurrencyHelpers

/// `onramp report` and `onramp rebuild` as one call: the job on a database,
/// then the report's results read in the same session, at the same `now`.
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

    /// `run`, with `render` (what the command prints and writes) run on a
    /// thread of its own as soon as the results are known, beside what is
    /// left of the run: the regressions' write, the sessions' closing and
    /// freeing what the run read. Its value is returned once both are done;
    /// when the run fails, the run's error is thrown. After the regressions'
    /// write, rendering the 1 M bench's JSON report took 4 ms, and that tail
    /// 7 ms.
    public static func run<Rendered: Sendable>(
        _ job: ProjectionJob, mode: ProjectionJob.Mode, query: ReportQuery, databaseURL: String, now: Int64? = nil,
        render: @escaping @Sendable (Outcome) throws -> Rendered
    ) async throws -> Rendered {
        let now = now ?? Timestamps.microseconds(Date())
        let rendering = Beside<Rendered>()
        // The second session connects while the first does (PostgreSQL
        // starts a process for each): one after the other, at 1 M events,
        // they were 5 ms of a 0.23 s run.
        let connecting = DispatchGroup()
        let sibling = NIOLockedValueBox<Connection?>(nil)
        DispatchQueue.global().async(group: connecting) {
            let connection = try? Connection.connect(databaseURL)
            sibling.withLockedValue { $0 = connection }
        }
        let pool = ConnectionPool(url: databaseURL, maxConnections: 1)
        let outcome: Result<Outcome, any Error>
        do {
            outcome = .success(
                try await pool.withConnection { c -> Outcome in
                    // The job's lock is held until the report is read: the
                    // report's days are partly read under the run's snapshot,
                    // and a run committing in between would mix in its own.
                    try ProjectionJob.locked(c) {
                        // A second session, when one can be had: the run reads the
                        // log on it, then the report reads its funnels on both.
                        connecting.wait()
                        let second = sibling.withLockedValue { $0 }
                        // An incremental run rewrites a few of the stored days:
                        // the report's reads of them all are done on the reader,
                        // under the run's snapshot, while the run's session
                        // rewrites those few, which alone are read after the
                        // commit, while the reader may still be reading the rest.
                        let stored = NIOLockedValueBox<Result<[String: StoredReportDays], any Error>?>(nil)
                        // (A selection naming no funnel is reported after the run, as before.)
                        let selects = (try? query.selectedFunnels(job.configuration)) != nil
                        let handoff = selects ? ReaderHandoff { reader in
                            let days = Result { try query.storedDays(reader, configuration: job.configuration) }
                            stored.withLockedValue { $0 = days }
                        } : nil
                        let (summary, rewritten) = try job.run(c, mode: mode, now: now, reader: second, whenReaderIdle: handoff)
                        let fresh = handoff == nil ? [:] : try query.rewrittenDays(c, configuration: job.configuration, rewritten: rewritten)
                        handoff?.wait()
                        let read = stored.withLockedValue { days in
                            defer { days = nil }
                            return days
                        }
                        if case .failure(let error) = read, job.showProgress {
                            // Only slower: every day is read after the commit.
                            FileHandle.standardError.write(Data("report: the stored days were not read beside the run (\(error))\n".utf8))
                        }
                        let beside = second.flatMap { !$0.isBroken && !$0.isInTransaction ? $0 : nil }
                        var results = try query.results(
                            c, beside: beside, configuration: job.configuration, now: now,
                            stored: try? read?.get(), rewritten: fresh)
                        let recomputed = Dictionary(summary.definitions.recompute.map { ($0.funnel, $0) }) { first, _ in first }
                        for index in results.indices {
                            results[index].report.recomputed = recomputed[results[index].report.funnel].map {
                                FunnelReport.Recomputation(reason: $0.reason, events: $0.events)
                            }
                        }
                        let outcome = Outcome(summary: summary, results: results, now: now)
                        rendering.start { try render(outcome) }
                        BackgroundRelease.drop(read)
                        // Only a report over every day, cut as the job cuts them, speaks for the funnel.
                        if query.from == nil && query.to == nil && query.timeZoneOverride == nil {
                            try c.transaction { c in
                                try RegressionTable.write(
                                    c, reports: results.map(\.report), configured: job.configuration.funnels.map(\.name), now: now)
                            }
                        }
                        return outcome
                    }
                })
        } catch {
            outcome = .failure(error)
        }
        await pool.close()
        let rendered = await rendering.finished()
        // The run's error first: what was rendered for a run that failed is not shown.
        let finished = try outcome.get()
        return try rendered?.get() ?? render(finished)
    }
}

/// Work started on a thread of its own, its value waited for.
private final class Beside<Value: Sendable>: Sendable {
    private let group = DispatchGroup()
    private let result = NIOLockedValueBox<Result<Value, any Error>?>(nil)

    /// Starts `work`; called at most once.
    func start(_ work: @escaping @Sendable () throws -> Value) {
        DispatchQueue.global().async(group: group) { [result] in
            let value = Result { try work() }
            result.withLockedValue { $0 = value }
        }
    }

    /// What the work returned or threw, once it is done; nil when it never started.
    func finished() async -> Result<Value, any Error>? {
        await withCheckedContinuation { continuation in
            group.notify(queue: .global()) { [result] in continuation.resume(returning: result.withLockedValue { $0 }) }
        }
    }
}
