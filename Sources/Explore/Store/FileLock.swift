import Foundation
import LogReading
import NIOConcurrencyHelpers

/// An exclusive `flock` on a file: two queries of one app refresh its store
/// one after the other. The lock is taken by a blocking `flock` on a lane of
/// its own (`Background`), so the waiter sleeps until the holder lets go,
/// not in rounds; the query's deadline and its Cancel still end the wait,
/// and a lock granted after the waiter gave up is handed straight back.
struct FileLock {
    private let descriptor: Int32

    private enum State { case waiting, held, failed, abandoned }

    static func acquire(_ file: URL, until deadline: Deadline?) throws -> FileLock {
        let descriptor = open(file.path, O_CREAT | O_RDWR, 0o644)
        guard descriptor >= 0 else { throw ColumnStoreError.unwritable(file.path) }
        let state = NIOLockedValueBox(State.waiting)
        let lane = Background(threads: 1)
        defer { lane.shutdownWhenDone() }
        let locked = lane.run {
            var status = flock(descriptor, LOCK_EX)
            while status != 0 && errno == EINTR { status = flock(descriptor, LOCK_EX) }
            let granted = status == 0
            state.withLockedValue { state in
                if state == .abandoned {
                    // The waiter is gone: it left the descriptor to this side.
                    if granted { flock(descriptor, LOCK_UN) }
                    close(descriptor)
                } else if granted {
                    state = .held
                } else {
                    close(descriptor)
                    state = .failed
                }
            }
            guard granted else { throw ColumnStoreError.unwritable(file.path) }
        }
        do {
            try locked.wait(checking: { try deadline?.check() })
        } catch {
            let held = state.withLockedValue { state -> Bool in
                if state == .waiting { state = .abandoned }
                return state == .held
            }
            // Granted before the waiter gave up: this side lets go.
            if held { FileLock(descriptor: descriptor).release() }
            throw error
        }
        return FileLock(descriptor: descriptor)
    }

    func release() {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}
