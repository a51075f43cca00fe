import Dispatch
import LibPQ

/// Work for a session the caller lent the run as its reader, once the run
/// reads no more there (`ProjectionRun.readerIsIdle`): it runs on a thread
/// of its own, under the run's snapshot, and the session's read-only
/// transaction is rolled back after it. The run commits without waiting
/// for it: the reader's snapshot is its own once imported, so the commit
/// changes nothing it sees. The caller waits (`wait`) before it uses the
/// session again or what the work produced; at 1 M events the run's
/// commit had waited 13 ms for the report's reads there.
final class ReaderHandoff: Sendable {
    private let work: @Sendable (Connection) -> Void
    private let group = DispatchGroup()

    init(_ work: @escaping @Sendable (Connection) -> Void) {
        self.work = work
    }

    /// Runs the work on `reader`, then ends the reader's transaction.
    func start(on reader: Connection) {
        group.enter()
        DispatchQueue.global().async { [work, group] in
            work(reader)
            // It only read: nothing of the run is lost with its transaction.
            try? reader.executeScript("ROLLBACK")
            group.leave()
        }
    }

    /// Returns once the work and the rollback after it are done; at once when it never started.
    func wait() {
        group.wait()
    }
}
