import CoreMetrics
import EventLog
import Logging
import LibPQ
import ServiceLifecycle
import NIOConcurrencyHelpers

/// Why a request's events could not be committed (HTTP 503 with `Retry-After`).
public struct CommitUnavailable: Error, Sendable, CustomStringConvertible {
    public enum Reason: String, Sendable {
        /// The queue of requests waiting for a commit is full.
        case saturated
        /// The database could not be reached; the writer fails fast for a moment.
        case databaseUnavailable
        /// The server is shutting down.
        case shuttingDown
        /// The commit was not confirmed in time (PostgreSQL hangs without
        /// refusing). It may still land; a retry with the same message ids is
        /// then counted as duplicates, so the events are stored once either way.
        case timedOut
    }

    public var reason: Reason
    public var retryAfterSeconds: Int
    public var description: String { reason.rawValue }
}

/// Group commit: every request queued while the previous commit ran is
/// appended with the others in ONE transaction, and each request is answered
/// only after that transaction committed.
///
/// A few writers (two by default) take groups from the one queue, so that one
/// group's rows are rendered in Swift while another's commit runs in
/// PostgreSQL: with a single writer the two sides took turns and neither was
/// busy. The `event_ids` ledger keeps concurrent writers exactly-once.
///
/// The queue is bounded; when it is full, or the database has just failed,
/// `commit` throws `CommitUnavailable` at once instead of waiting. After a
/// connection failure the writer fails fast for `backoff`, then lets the next
/// group through as a probe, so service resumes on its own when PostgreSQL is back.
final class GroupCommitter: Service, Sendable {
    /// The outcome of one request: for each of its events, what became of it.
    typealias Outcome = [AppendOutcome]

    struct Pending: Sendable {
        let events: [NewEvent]
        let quarantine: [QuarantineEntry]
        let answer: Answer
    }

    /// A request's answer, given once: by the writer when its group commits
    /// or fails, or by the request's deadline, whichever comes first.
    final class Answer: Sendable {
        private let continuation: NIOLockedValueBox<CheckedContinuation<Outcome, any Error>?>
        private let deadline = NIOLockedValueBox<Task<Void, Never>?>(nil)

        init(_ continuation: CheckedContinuation<Outcome, any Error>) {
            self.continuation = NIOLockedValueBox(continuation)
        }

        /// Answers `CommitUnavailable(.timedOut)` after `timeout` unless answered before.
        func expire(after timeout: Duration) {
            let task = Task { [weak self] in
                guard (try? await Task.sleep(for: timeout)) != nil else { return }
                self?.resume(with: .failure(CommitUnavailable(reason: .timedOut, retryAfterSeconds: 1)))
            }
            deadline.withLockedValue { $0 = task }
            // A writer may have answered already and found no deadline to cancel.
            if continuation.withLockedValue({ $0 == nil }) { task.cancel() }
        }

        func resume(with result: Result<Outcome, any Error>) {
            guard let waiting = continuation.withLockedValue({ c in defer { c = nil }; return c }) else { return }
            deadline.withLockedValue { $0?.cancel() }
            waiting.resume(with: result)
        }
    }

    private struct State {
        var queue: [Pending] = []
        var failingUntil: ContinuousClock.Instant?
        var closed = false
        /// Read from the database at the first commit: whether rows carry a
        /// Citus shard key. A log distributed later needs a server restart.
        var layout: EventLogLayout?
    }

    // A pthread lock: ThreadSanitizer cannot see Synchronization.Mutex on Linux and reports false races.

    private let pool: ConnectionPool
    private let maxQueuedRequests: Int
    private let maxEventsPerCommit: Int
    private let backoff: Duration
    private let commitTimeout: Duration
    private let metrics: IngestMetrics
    private let logger: Logger
    private let state = NIOLockedValueBox(State())
    /// One wake-up stream per writer: an AsyncStream has a single consumer.
    private let wakeups: [AsyncStream<Void>]
    private let wakes: [AsyncStream<Void>.Continuation]

    init(
        pool: ConnectionPool, writers: Int = 2, maxQueuedRequests: Int, maxEventsPerCommit: Int = 20_000,
        backoff: Duration = .seconds(1), commitTimeout: Duration = .seconds(30), metrics: IngestMetrics, logger: Logger
    ) {
        self.pool = pool
        self.maxQueuedRequests = maxQueuedRequests
        self.maxEventsPerCommit = maxEventsPerCommit
        self.backoff = backoff
        self.commitTimeout = commitTimeout
        self.metrics = metrics
        self.logger = logger
        let streams = (0..<max(1, writers)).map { _ in AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1)) }
        wakeups = streams.map(\.stream)
        wakes = streams.map(\.continuation)
    }

    /// Requests waiting for a commit, for metrics.
    var queueDepth: Int { state.withLockedValue { $0.queue.count } }

    /// Queues the events (and rejected messages) and returns once they are
    /// committed; throws `CommitUnavailable` at once when that cannot happen
    /// soon, and after `commitTimeout` when the commit has not been confirmed.
    func commit(_ events: [NewEvent], quarantine: [QuarantineEntry]) async throws -> Outcome {
        if events.isEmpty && quarantine.isEmpty { return [] }
        return try await withCheckedThrowingContinuation { continuation in
            let answer = Answer(continuation)
            let refusal = state.withLockedValue { s -> CommitUnavailable? in
                if s.closed { return CommitUnavailable(reason: .shuttingDown, retryAfterSeconds: 5) }
                if let until = s.failingUntil, until > .now {
                    return CommitUnavailable(reason: .databaseUnavailable, retryAfterSeconds: 1)
                }
                if s.queue.count >= maxQueuedRequests { return CommitUnavailable(reason: .saturated, retryAfterSeconds: 1) }
                s.queue.append(Pending(events: events, quarantine: quarantine, answer: answer))
                return nil
            }
            if let refusal {
                answer.resume(with: .failure(refusal))
            } else {
                // Only a queued request gets a deadline: a refused one is answered already.
                answer.expire(after: commitTimeout)
                for wake in wakes { wake.yield() }
            }
        }
    }

    /// The writer loop. On graceful shutdown it stops taking new requests,
    /// commits and answers everything already queued, then returns.
    func run() async throws {
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { writers in
                for wakeup in wakeups {
                    writers.addTask {
                        for await _ in wakeup { await self.drain() }
                    }
                }
            }
        } onGracefulShutdown: {
            self.state.withLockedValue { $0.closed = true }
            for wake in self.wakes { wake.finish() }
        }
        await drain()
        logger.info("group commit writer stopped")
    }

    /// Commits groups until the queue is empty.
    private func drain() async {
        while true {
            let group = state.withLockedValue { s -> [Pending] in
                var taken: [Pending] = []
                var count = 0
                while let next = s.queue.first, taken.isEmpty || count + next.events.count <= maxEventsPerCommit {
                    taken.append(s.queue.removeFirst())
                    count += next.events.count
                }
                return taken
            }
            if group.isEmpty { return }
            await commit(group)
        }
    }

    private func commit(_ group: [Pending]) async {
        let events = group.flatMap(\.events)
        let quarantine = group.flatMap(\.quarantine)
        let started = ContinuousClock.now
        do {
            let known = state.withLockedValue(\.layout)
            let stored = try await pool.withConnection { connection in
                let layout = try known ?? EventLogLayout.read(connection)
                if known == nil { self.state.withLockedValue { $0.layout = layout } }
                return try EventStore.append(events, quarantine: quarantine, layout: layout, on: connection)
            }
            metrics.commitLatency.recordNanoseconds((ContinuousClock.now - started).nanoseconds)
            metrics.groupSize.record(group.count)
            metrics.updatePool(pool.usage)
            state.withLockedValue { $0.failingUntil = nil }
            var offset = 0
            for pending in group {
                let slice = Array(stored[offset..<offset + pending.events.count])
                offset += pending.events.count
                pending.answer.resume(with: .success(slice))
            }
        } catch let error as PostgresError
            where error.isConnectionFailure || error.isResourceShortage || error.code == .poolTimeout || error.code == .poolClosed
        {
            // Unavailable (or out of disk, memory, connections) for everyone, not this request's fault: 503 and back off.
            logger.warning("commit failed: database unavailable", metadata: ["error": "\(error)", "requests": "\(group.count)"])
            let retry = max(1, Int(backoff.components.seconds))
            let until = ContinuousClock.now + backoff
            let waiting = state.withLockedValue { s -> [Pending] in
                s.failingUntil = until
                defer { s.queue.removeAll() }
                return s.queue
            }
            for pending in group + waiting {
                pending.answer.resume(with: .failure(CommitUnavailable(reason: .databaseUnavailable, retryAfterSeconds: retry)))
            }
        } catch {
            // Not the database's availability: something in one request. Commit
            // each request alone so one cannot fail the others.
            if group.count > 1 {
                logger.warning("group commit failed; retrying requests one by one", metadata: ["error": "\(error)"])
                for pending in group { await commit([pending]) }
            } else {
                logger.error("commit failed", metadata: ["error": "\(error)"])
                for pending in group { pending.answer.resume(with: .failure(error)) }
            }
        }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
