import LibPQ
import NIOConcurrencyHelpers

/// Runs `COPY … FROM STDIN`s one after another on a lane of their own
/// (`Background`, one thread) while the job evaluates more persons and
/// streams the next app's history, so the job's CPU and PostgreSQL's
/// inserting overlap instead of taking turns. The connection is the job's
/// own; its lock keeps a COPY and the job's other statements from
/// interleaving, and `wait` comes before anything that reads what the COPYs
/// wrote.
final class CopyPipeline: Sendable {
    private let connection: Connection
    /// Nil: each COPY runs at once, on the thread that submits it.
    private let lane: Background?
    /// The COPYs queued or running, oldest first.
    private let queued = NIOLockedValueBox<[Pending<Void>]>([])
    /// About this many batches of rows wait in memory for their COPY.
    private let limit: Int

    init(connection: Connection, lane: Background?, queued limit: Int = 8) {
        self.connection = connection
        self.lane = lane
        self.limit = limit
    }

    /// Queues a COPY of `rows` by `statement` (`COPY … FROM STDIN (FORMAT
    /// binary)`), first waiting for the oldest while the queue is full;
    /// rethrows the error of an earlier COPY that failed.
    func submit(_ rows: BinaryCopyRows, with statement: String) throws {
        guard rows.rowCount > 0 else { return }
        let connection = self.connection
        guard let lane else {
            _ = try connection.copyIn(statement) { writer in try writer.write(rows) }
            return
        }
        let finished = queued.withLockedValue { queue in
            let done = queue.prefix { $0.isDone }
            queue.removeFirst(done.count)
            return Array(done) + (queue.count >= limit ? [queue.removeFirst()] : [])
        }
        for copy in finished { try copy.wait() }
        let copy = lane.run { _ = try connection.copyIn(statement) { writer in try writer.write(rows) } }
        queued.withLockedValue { $0.append(copy) }
    }

    /// Waits until every queued COPY ran; rethrows the error of one that failed.
    func wait() throws {
        let copies = queued.withLockedValue { queue in
            defer { queue = [] }
            return queue
        }
        for copy in copies { try copy.wait() }
    }
}
