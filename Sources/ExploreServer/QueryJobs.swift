import Explore
import Foundation
import LibPQ
import NIOConcurrencyHelpers
import Reports

/// The explorer's queries, each run in the background while the page polls
/// it: an analyst editing a funnel starts a query per edit and cancels the
/// one before. Finished answers are kept a while for the poll that fetches
/// them, then dropped.
final class QueryJobs: Sendable {
    enum Outcome: Sendable {
        /// The answer as `onramp funnel --format json` prints it.
        case done(String)
        case failed(String)
        case cancelled
    }

    struct Job: Sendable {
        let control = QueryControl()
        let started = ContinuousClock.now
        var outcome: Outcome?
        var finished: ContinuousClock.Instant?
    }

    /// Finished queries kept for their poll; older ones go first.
    static let kept = 64
    static let keptFor = Duration.seconds(600)
    /// Queries running or waiting for a connection at once: a page starts
    /// one per edit and cancels the one before, so more means something is
    /// asking faster than it reads the answers.
    let limit: Int

    private let jobs = NIOLockedValueBox([String: Job]())
    private let pool: ConnectionPool
    private let explorer: Explorer
    private let keeping: Set<String>
    let metrics: ExploreMetrics

    init(pool: ConnectionPool, explorer: Explorer, keeping: Set<String>, limit: Int, metrics: ExploreMetrics) {
        self.pool = pool
        self.explorer = explorer
        self.keeping = keeping
        self.limit = limit
        self.metrics = metrics
    }

    /// Starts `query`; returns its id at once, or nil when `limit` queries are unfinished.
    func start(_ query: FunnelQuery) -> String? {
        let id = UUID().uuidString.lowercased()
        let job = Job()
        let started = jobs.withLockedValue { jobs -> Bool in
            Self.forgetOld(&jobs)
            guard jobs.values.filter({ $0.outcome == nil }).count < limit else { return false }
            jobs[id] = job
            return true
        }
        guard started else {
            metrics.ended(.refused, after: nil)
            return nil
        }
        metrics.started()
        let control = job.control
        let (pool, explorer, keeping) = (pool, explorer, keeping)
        Task {
            let outcome: Outcome
            do {
                let answer = try await pool.withConnection { c in try explorer.answer(query, on: c, keeping: keeping, control: control) }
                let about = QueryTimeJSON.Query(
                    asOf: Timestamps.format(microseconds: query.now), from: query.from, to: query.to, events: answer.events,
                    audiences: query.audiences.within, notAudiences: query.audiences.outside, logFrom: answer.logFrom)
                // Cancelled after its last check: the page asked not to see it.
                outcome = control.isCancelled
                    ? .cancelled : .done(QueryTimeJSON.render(answer.report, histogram: answer.histogram, query: about))
            } catch ExploreError.cancelled {
                outcome = .cancelled
            } catch {
                // The server's message for the analyst who asked (a value it quotes is one they may read).
                let message = (error as? PostgresError).map { "\($0): \($0.message)" } ?? String(describing: error)
                outcome = control.isCancelled ? .cancelled : .failed(message)
            }
            self.finish(id, outcome)
        }
        return id
    }

    private func finish(_ id: String, _ outcome: Outcome) {
        let started = jobs.withLockedValue { jobs -> ContinuousClock.Instant? in
            jobs[id]?.outcome = outcome
            jobs[id]?.finished = .now
            return jobs[id]?.started
        }
        let ended: ExploreMetrics.Outcome = switch outcome {
        case .done: .done
        case .failed: .failed
        case .cancelled: .cancelled
        }
        metrics.ended(ended, after: started.map { .now - $0 } ?? .zero)
    }

    /// The query's state as the page reads it; nil for an unknown id.
    func status(_ id: String) -> String? {
        guard let job = jobs.withLockedValue({ $0[id] }) else { return nil }
        switch job.outcome {
        case .done(let answer)?:
            return #"{"state":"done","answer":"# + answer.trimmingCharacters(in: .whitespacesAndNewlines) + "}"
        case .failed(let message)?:
            return JSONText.object(["state": "failed", "error": message])
        case .cancelled?:
            return JSONText.object(["state": "cancelled"])
        case nil:
            let elapsed = ContinuousClock.now - job.started
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            return JSONText.object([
                "state": "running", "phase": job.control.phase.rawValue, "events_read": job.control.eventsRead,
                "seconds": (seconds * 10).rounded() / 10,
            ])
        }
    }

    /// Cancels a query still running; false for an unknown id. Blocking
    /// (libpq asks the server over a connection of its own): call it off the
    /// event loop.
    func cancel(_ id: String) -> Bool {
        guard let control = jobs.withLockedValue({ $0[id].map { $0.outcome == nil ? $0.control : nil } }) else { return false }
        control?.cancel()
        return true
    }

    private static func forgetOld(_ jobs: inout [String: Job]) {
        let now = ContinuousClock.now
        jobs = jobs.filter { _, job in job.finished.map { now - $0 < keptFor } ?? true }
        let finished = jobs.filter { $0.value.finished != nil }.sorted { ($0.value.finished ?? now) < ($1.value.finished ?? now) }
        for (id, _) in finished.prefix(max(0, finished.count - kept)) { jobs[id] = nil }
    }
}

/// Small JSON answers, written with Foundation's serializer.
enum JSONText {
    static func object(_ fields: [String: Any]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// One string as a JSON value.
    static func string(_ text: String) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: text, options: [.fragmentsAllowed, .withoutEscapingSlashes])) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
