import NIOConcurrencyHelpers
import NIOPosix

/// The one way the nightly job runs work beside itself: tasks on threads of
/// a `NIOThreadPool` of its own, as the connection pool runs blocking libpq
/// calls on one, each answered by a `Pending`. With one thread the tasks
/// run in the order given, as a session's statements must; with more they
/// share a CPU-bound stage. A run's lanes live as long as the run
/// (`ProjectionRun`), which shuts them down in one place.
final class Background: Sendable {
    private let threads: NIOThreadPool
    /// Its threads: how many tasks run at once.
    let count: Int

    init(threads count: Int) {
        self.count = max(1, count)
        threads = NIOThreadPool(numberOfThreads: self.count)
        threads.start()
    }

    /// Starts `body` on a free thread (in order, on one thread) and returns at once.
    func run<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) -> Pending<Value> {
        let pending = Pending<Value>()
        threads.submit { state in
            guard case .active = state else { return pending.finish(.failure(ProjectionError(code: .stopped, description: "the run stopped before this step began"))) }
            pending.finish(Result { try body() })
        }
        return pending
    }

    /// Stops the threads; a task not yet started finishes as failed.
    func shutdown() {
        try? threads.syncShutdownGracefully()
    }
}

/// A task's result, once it is done.
final class Pending<Value: Sendable>: Sendable {
    private let done = ConditionLock(value: false)
    private let result = NIOLockedValueBox<Result<Value, any Error>?>(nil)

    fileprivate func finish(_ value: Result<Value, any Error>) {
        done.lock()
        result.withLockedValue { $0 = value }
        done.unlock(withValue: true)
    }

    /// Waits for the task; returns what it returned or rethrows what it threw.
    func wait() throws -> Value {
        done.lock(whenValue: true)
        done.unlock()
        guard let value = result.withLockedValue({ $0 }) else {
            throw ProjectionError(code: .stopped, description: "a step of the run ended without a result")
        }
        return try value.get()
    }
}
