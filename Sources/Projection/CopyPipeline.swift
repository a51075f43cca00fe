import Dispatch
import LibPQ
import NIOConcurrencyHelpers

/// Runs one `COPY … FROM STDIN` at a time on a background thread while the
/// job renders the next rows, so the job's CPU and PostgreSQL's inserting
/// overlap instead of taking turns. The connection is the job's own: between
/// `submit` and the next `wait` the caller must not use it.
final class CopyPipeline: Sendable {
    private let connection: Connection
    private let statement: String
    private let queue = DispatchQueue(label: "onramp.copy-pipeline")
    private let group = DispatchGroup()
    private let failure = NIOLockedValueBox<(any Error)?>(nil)

    init(connection: Connection, statement: String) {
        self.connection = connection
        self.statement = statement
    }

    /// Waits for the COPY under way, then starts one of `rows`.
    func submit(_ rows: CopyRows) throws {
        try wait()
        guard rows.rowCount > 0 else { return }
        let connection = self.connection, statement = self.statement, failure = self.failure
        queue.async(group: group) {
            do {
                try connection.copyIn(statement) { writer in try writer.write(rows) }
            } catch {
                failure.withLockedValue { $0 = error }
            }
        }
    }

    /// Waits until no COPY runs; rethrows the error of one that failed.
    func wait() throws {
        group.wait()
        if let error = failure.withLockedValue({ $0 }) { throw error }
    }
}
