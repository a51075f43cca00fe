import LibPQ
import LogReading
import NIOConcurrencyHelpers

/// Spills an incremental run's touched histories, app after app, on the
/// snapshot reader's lane (`Background`, one thread, the reader's session),
/// while the run's own session deletes and closes the stored outcomes and
/// then COPYs the new ones. On one session these would take turns, the
/// history reads queued behind the deletes and window closes. What the run
/// needs of the reader only later (`then`, its result `afterwards`) runs
/// there after the histories, while the run's session still deletes.
final class HistoryPrefetch<Afterwards: Sendable>: Sendable {
    private let histories: [Pending<SpilledHistory>]
    private let then: Pending<Afterwards>
    /// Set when the run closes early or a read fails: the reads not begun are skipped.
    private let stopped: NIOLockedValueBox<Bool>
    /// Histories handed out by `next`.
    private let taken = NIOLockedValueBox(0)

    /// Starts reading the apps of `readers`, in that order, on `connection`,
    /// their events given the persons and groups of `identities` (by app,
    /// `TouchedPersons`), then runs `then` there.
    init(
        _ readers: [PersonHistoryReader], identities: [String: PersonHistoryReader.Identities], on connection: Connection, lane: Background,
        partitions: Int, spillBuffer: Int, then: @escaping @Sendable (Connection) throws -> Afterwards
    ) {
        let stopped = NIOLockedValueBox(false)
        self.stopped = stopped
        @Sendable func unlessStopped<T>(_ body: () throws -> T) throws -> T {
            guard !stopped.withLockedValue({ $0 }) else { throw ProjectionError(code: .stopped, description: "the history reads stopped") }
            do {
                return try body()
            } catch {
                stopped.withLockedValue { $0 = true }
                throw error
            }
        }
        histories = readers.map { reader in
            lane.run {
                try unlessStopped {
                    try reader.spill(
                        connection, scope: .touched(identities[reader.app] ?? .init()), partitions: partitions, spillBuffer: spillBuffer)
                }
            }
        }
        self.then = lane.run { try unlessStopped { try then(connection) } }
    }

    /// What `then` returned, once every history was read and it ran.
    func afterwards() throws -> Afterwards { try then.wait() }

    /// The next app's history, in the order the readers were given; waits
    /// for it. Called at most once per reader.
    func next() throws -> SpilledHistory {
        let index = taken.withLockedValue { taken in
            defer { taken += 1 }
            return taken
        }
        guard index < histories.count else {
            throw ProjectionError(code: .spill, description: "the incremental run asked for more histories than it reads")
        }
        return try histories[index].wait()
    }

    /// Skips the reads not begun, waits for the one under way, and removes
    /// the histories never taken (a run that failed part-way).
    func close() {
        stopped.withLockedValue { $0 = true }
        _ = try? then.wait()
        let taken = taken.withLockedValue { $0 }
        for history in histories.dropFirst(taken) { try? history.wait().remove() }
    }
}
