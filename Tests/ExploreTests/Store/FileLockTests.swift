import Foundation
@testable import Explore
import LogReading
import Testing

/// The store's lock: a blocking `flock` on a lane of its own, whose wait
/// still ends at the query's deadline and on Cancel. The waits block their
/// threads, so they run on lanes of the test's own, not on Swift's
/// cooperative threads.
@Suite struct FileLockTests {
    private func lockFile() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("onramp-lock-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory.appendingPathComponent("lock")
    }

    @Test("a waiter is granted the lock as soon as its holder lets go")
    func grantedOnRelease() throws {
        let file = try lockFile()
        let held = try FileLock.acquire(file, until: nil)
        let lane = Background(threads: 1)
        defer { lane.shutdown() }
        let granted = lane.run { () throws -> ContinuousClock.Instant in
            let lock = try FileLock.acquire(file, until: Deadline(seconds: 30))
            defer { lock.release() }
            return .now
        }
        Thread.sleep(forTimeInterval: 0.3)
        let released = ContinuousClock.now
        held.release()
        let late = try granted.wait() - released
        #expect(late < .seconds(5), "granted \(late) after the release")
    }

    @Test("a wait ends at the deadline, and on Cancel, while the lock stays held; the lock is free once its holder lets go")
    func deadlineAndCancel() throws {
        let file = try lockFile()
        let held = try FileLock.acquire(file, until: nil)
        #expect {
            try FileLock.acquire(file, until: Deadline(seconds: 0.2))
        } throws: { error in
            if case .timedOut = error as? ExploreError { true } else { false }
        }
        let control = QueryControl()
        let lane = Background(threads: 1)
        defer { lane.shutdown() }
        let cancelled = lane.run { try FileLock.acquire(file, until: Deadline(seconds: 60, control: control)) }
        Thread.sleep(forTimeInterval: 0.2)
        control.cancel()
        #expect {
            try cancelled.wait()
        } throws: { error in
            if case .cancelled = error as? ExploreError { true } else { false }
        }
        held.release()
        // The abandoned waits hand the lock back when they are granted it.
        let again = try FileLock.acquire(file, until: Deadline(seconds: 30))
        again.release()
    }
}
