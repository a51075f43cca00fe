import Dispatch
import LibPQ
import NIOConcurrencyHelpers

/// Runs `COPY … FROM STDIN`s one after another on a background thread while
/// the job evaluates more persons and streams the next app's history, so the
/// job's CPU and PostgreSQL's inserting overlap instead of taking turns. The
/// connection is the job's own; its lock keeps a COPY and the job's other
/// statements from interleaving, and `wait` comes before anything that reads
/// what the COPYs wrote.
final class CopyPipeline: Sendable {
    private let connection: Connection
    private let queue = DispatchQueue(label: "onramp.copy-pipeline")
    private let group = DispatchGroup()
    /// At most this many batches of rows wait in memory for their COPY.
    private let slots: DispatchSemaphore
    private let failure = NIOLockedValueBox<(any Error)?>(nil)

    init(connection: Connection, queued: Int = 8) {
        self.connection = connection
        self.slots = DispatchSemaphore(value: queued)
    }

    /// Queues a COPY of `rows` by `statement` (`COPY … FROM STDIN (FORMAT
    /// binary)`), waiting while the queue is full; rethrows the error of an
    /// earlier COPY that failed.
    func submit(_ rows: BinaryCopyRows, with statement: String) throws {
        if let error = failure.withLockedValue({ $0 }) { throw error }
        guard rows.rowCount > 0 else { return }
        slots.wait()
        let connection = self.connection, failure = self.failure, slots = self.slots
        queue.async(group: group) {
            defer { slots.signal() }
            guard failure.withLockedValue({ $0 }) == nil else { return }  // the transaction is lost already
            do {
                try connection.copyIn(statement) { writer in try writer.write(rows) }
            } catch {
                failure.withLockedValue { $0 = error }
            }
        }
    }

    /// Waits until every queued COPY ran; rethrows the error of one that failed.
    func wait() throws {
        group.wait()
        if let error = failure.withLockedValue({ $0 }) { throw error }
    }
}
