import Foundation

/// State shared between the app's threads and the client's tasks, behind an
/// `NSLock`. Not `Synchronization.Mutex`: on Linux it waits on a futex that
/// ThreadSanitizer cannot see, so every access it guarded was reported as a
/// race in the fault suite's `--sanitize=thread` run. `NSLock` is a pthread
/// mutex, which TSan understands. (The server uses NIO's `NIOLockedValueBox`
/// for the same reason; the SDK does not depend on NIO.)
final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
