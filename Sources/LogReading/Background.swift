import Foundation
import NIOConcurrencyHelpers
import NIOPosix

/// The one way the nightly job, query time and the archive run work beside themselves: tasks on threads of
/// a `NIOThreadPool` of its own, as the connection pool runs blocking libpq
/// calls on one, each answered by a `Pending`. With one thread the tasks
/// run in the order given, as a session's statements must; with more they
/// share a CPU-bound stage. A run's lanes live as long as the run
/// (`ProjectionRun`), which shuts them down in one place; a query's as long
/// as its count, and a store lock's wait as long as it blocks.
package final class Background: Sendable {
    private let threads: NIOThreadPool
    /// Its threads: how many tasks run at once.
    package let count: Int

    package init(threads count: Int) {
        self.count = max(1, count)
        threads = NIOThreadPool(numberOfThreads: self.count)
        threads.start()
    }

    /// Starts `body` on a free thread (in order, on one thread) and returns at once.
    package func run<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) -> Pending<Value> {
        let pending = Pending<Value>()
        threads.submit { state in
            guard case .active = state else { return pending.finish(.failure(LogReadError(.stopped, "the work stopped before this step began"))) }
            pending.finish(Result { try body() })
        }
        return pending
    }

    /// `transform` of each item, run on the threads side by side and
    /// returned in order; the first error in that order is rethrown.
    package func map<Item: Sendable, Output: Sendable>(
        _ items: [Item], _ transform: @escaping @Sendable (Item) throws -> Output
    ) throws -> [Output] {
        let started = items.map { item in run { try transform(item) } }
        return try started.map { try $0.wait() }
    }

    /// `map` on lanes made for the call, one per core, stopped after it:
    /// for work that runs now and then (an archive's files), not for a run's length.
    package static func mapOnEveryCore<Item: Sendable, Output: Sendable>(
        _ items: [Item], _ transform: @escaping @Sendable (Item) throws -> Output
    ) throws -> [Output] {
        let lanes = Background(threads: ProcessInfo.processInfo.activeProcessorCount)
        defer { lanes.shutdown() }
        return try lanes.map(items, transform)
    }

    /// Stops the threads; a task not yet started finishes as failed.
    package func shutdown() {
        try? threads.syncShutdownGracefully()
    }

    /// Stops the threads once their tasks are done, without waiting for
    /// them: for a lane whose task may block long after its caller gave up.
    package func shutdownWhenDone() {
        threads.shutdownGracefully { _ in }
    }
}

/// A task's result, once it is done.
package final class Pending<Value: Sendable>: Sendable {
    private let done = ConditionLock(value: false)
    private let result = NIOLockedValueBox<Result<Value, any Error>?>(nil)

    fileprivate func finish(_ value: Result<Value, any Error>) {
        done.lock()
        result.withLockedValue { $0 = value }
        done.unlock(withValue: true)
    }

    /// Waits for the task; returns what it returned or rethrows what it threw.
    package func wait() throws -> Value {
        done.lock(whenValue: true)
        done.unlock()
        return try value()
    }

    /// Waits for the task as `wait()` does, calling `check` every `interval`
    /// seconds while it runs: what `check` throws (a deadline passed, a
    /// cancel) ends the wait, and the task runs on.
    package func wait(checking check: () throws -> Void, every interval: Double = 0.05) throws -> Value {
        while !done.lock(whenValue: true, timeoutSeconds: interval) { try check() }
        done.unlock()
        return try value()
    }

    private func value() throws -> Value {
        guard let value = result.withLockedValue({ $0 }) else {
            throw LogReadError(.stopped, "a step ended without a result")
        }
        return try value.get()
    }
}
