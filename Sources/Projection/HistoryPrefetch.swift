import Dispatch
import LibPQ
import NIOConcurrencyHelpers

/// Spills an incremental run's touched histories, app after app, on a
/// background thread and on the snapshot reader's session, while the run's
/// own session deletes and closes the stored outcomes and then COPYs the
/// new ones. On one session these took turns: at 10 M events, 3 s of
/// history reads queued behind 2 s of deletes and window closes.
final class HistoryPrefetch: Sendable {
    private struct State {
        var spilled: [Result<SpilledHistory, any Error>] = []
        var taken = 0
        var stopped = false
    }

    private let group = DispatchGroup()
    private let ready = DispatchSemaphore(value: 0)
    private let state = NIOLockedValueBox(State())

    /// Starts reading the apps of `readers`, in that order, on `connection`.
    init(_ readers: [PersonHistoryReader], on connection: Connection, partitions: Int, spillBuffer: Int) {
        let state = self.state, ready = self.ready
        DispatchQueue.global().async(group: group) {
            for reader in readers {
                if state.withLockedValue({ $0.stopped }) { return }
                let result = Result {
                    try reader.spill(connection, scope: .touched, partitions: partitions, spillBuffer: spillBuffer)
                }
                state.withLockedValue { $0.spilled.append(result) }
                ready.signal()
                if case .failure = result { return }
            }
        }
    }

    /// The next app's history, in the order the readers were given; waits
    /// for it. Called at most once per reader.
    func next() throws -> SpilledHistory {
        ready.wait()
        return try state.withLockedValue { s in
            defer { s.taken += 1 }
            return s.spilled[s.taken]
        }.get()
    }

    /// Stops after the app being read, waits for it, and removes the
    /// histories never taken (a run that failed part-way).
    func close() {
        state.withLockedValue { $0.stopped = true }
        group.wait()
        let untaken = state.withLockedValue { s in s.spilled[s.taken...] }
        for result in untaken { try? result.get().remove() }
    }
}
