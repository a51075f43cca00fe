import LibPQ
import NIOConcurrencyHelpers

/// What a running query shares with whoever waits for it (the explorer's
/// page): how far it got, and a way to stop it. Cancelling stops the
/// statement on the server and the counting between persons alike.
public final class QueryControl: Sendable {
    public enum Phase: String, Sendable {
        /// Waiting for a database connection, or for another query of the app to finish with its store.
        case waiting
        /// Reading the events committed since the store's last read.
        case reading
        /// Evaluating persons.
        case counting
    }

    private struct Progress {
        var phase = Phase.waiting
        var eventsRead = 0
    }

    /// The connection's canceller while this query runs on it, and whether it
    /// was cancelled: one lock, so a cancel never reaches a connection the
    /// query has handed back (and another query now uses).
    private struct Cancellation {
        var cancelled = false
        var canceller: StatementCanceller?
    }

    private let progress = NIOLockedValueBox(Progress())
    private let cancellation = NIOLockedValueBox(Cancellation())

    public init() {}

    public var phase: Phase { progress.withLockedValue { $0.phase } }
    /// Events read from the log so far (a store read whole reads them all).
    public var eventsRead: Int { progress.withLockedValue { $0.eventsRead } }
    public var isCancelled: Bool { cancellation.withLockedValue { $0.cancelled } }

    /// Stops the query: its running statement now (a blocking call: libpq
    /// connects to the server to ask), its counting at the next check.
    public func cancel() {
        cancellation.withLockedValue { state in
            state.cancelled = true
            state.canceller?.cancel()
        }
    }

    /// The query runs on `connection` from now on; throws when it was cancelled already.
    func attach(_ connection: Connection) throws {
        let canceller = connection.canceller()
        try cancellation.withLockedValue { state in
            if state.cancelled { throw ExploreError.cancelled }
            state.canceller = canceller
        }
    }

    /// The query is done with its connection.
    func detach() {
        cancellation.withLockedValue { $0.canceller = nil }
    }

    func enter(_ phase: Phase) { progress.withLockedValue { $0.phase = phase } }
    func read(_ events: Int) { progress.withLockedValue { $0.eventsRead = events } }
}
