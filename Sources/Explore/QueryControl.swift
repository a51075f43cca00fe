import LibPQ
import NIOConcurrencyHelpers

/// What a running query shares with whoever waits for it (the explorer's
/// page): how far it got, and a way to stop it. Cancelling stops the
/// statement on the server and the counting between persons alike.
public final class QueryControl: Sendable {
    public enum Phase: String, Sendable {
        /// Waiting for another query of the app to finish with its store.
        case waiting
        /// Reading the events committed since the store's last read.
        case reading
        /// Evaluating persons.
        case counting
    }

    private struct State {
        var phase = Phase.waiting
        var eventsRead = 0
        var cancelled = false
        var canceller: StatementCanceller?
    }

    private let state = NIOLockedValueBox(State())

    public init() {}

    public var phase: Phase { state.withLockedValue { $0.phase } }
    /// Events read from the log so far (a store read whole reads them all).
    public var eventsRead: Int { state.withLockedValue { $0.eventsRead } }
    public var isCancelled: Bool { state.withLockedValue { $0.cancelled } }

    /// Stops the query: its running statement now, its counting at the next check.
    public func cancel() {
        let canceller = state.withLockedValue { state -> StatementCanceller? in
            state.cancelled = true
            return state.canceller
        }
        canceller?.cancel()
    }

    func attach(_ connection: Connection) {
        let canceller = connection.canceller()
        state.withLockedValue { $0.canceller = canceller }
    }

    func enter(_ phase: Phase) { state.withLockedValue { $0.phase = phase } }
    func read(_ events: Int) { state.withLockedValue { $0.eventsRead = events } }
}
