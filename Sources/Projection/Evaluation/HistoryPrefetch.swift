import Dispatch
import LibPQ
import NIOConcurrencyHelpers

/// Spills an incremental run's touched histories, app after app, on a
/// background thread and on the snapshot reader's session, while the run's
/// own session deletes and closes the stored outcomes and then COPYs the
/// new ones. On one session these would take turns, the history reads
/// queued behind the deletes and window closes. What the run needs of the
/// reader only later (`then`, its result `afterwards`) runs there after the
/// histories, while the run's session still deletes.
final class HistoryPrefetch<Afterwards: Sendable>: Sendable {
    private struct State {
        var spilled: [Result<SpilledHistory, any Error>] = []
        var taken = 0
        var stopped = false
        var afterwards: Result<Afterwards, any Error>?
    }

    private let group = DispatchGroup()
    private let ready = DispatchSemaphore(value: 0)
    private let state = NIOLockedValueBox(State())

    /// Starts reading the apps of `readers`, in that order, on `connection`,
    /// their anonymous events given the persons of `owners` (app ->
    /// anonymous id -> person, `TouchedPersons`), then runs `then` there.
    init(
        _ readers: [PersonHistoryReader], owners: [String: [String: String]], on connection: Connection, partitions: Int,
        spillBuffer: Int, then: @escaping @Sendable (Connection) throws -> Afterwards
    ) {
        let state = self.state, ready = self.ready
        DispatchQueue.global().async(group: group) {
            for reader in readers {
                if state.withLockedValue({ $0.stopped }) { return }
                let result = Result {
                    try reader.spill(
                        connection, scope: .touched(owners: owners[reader.app] ?? [:]), partitions: partitions, spillBuffer: spillBuffer)
                }
                state.withLockedValue { $0.spilled.append(result) }
                ready.signal()
                if case .failure = result { return }
            }
            if state.withLockedValue({ $0.stopped }) { return }
            let afterwards = Result { try then(connection) }
            state.withLockedValue { $0.afterwards = afterwards }
        }
    }

    /// What `then` returned, once every history was read and it ran.
    func afterwards() throws -> Afterwards {
        group.wait()
        guard let result = state.withLockedValue({ $0.afterwards }) else {
            throw ProjectionError(code: .spill, description: "the incremental run's reader stopped before it finished")
        }
        return try result.get()
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
