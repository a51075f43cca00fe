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

    /// Who closes the descriptor: the waiter while the task has not begun
    /// (`waiting`) or when it holds the lock (`held`), the task once it
    /// blocks (`blocked`) and finds the waiter gone (`abandoned`).
    private enum State { case waiting, blocked, held, failed, abandoned }

    static func acquire(_ file: URL, until deadline: Deadline?) throws -> FileLock {
        let descriptor = open(file.path, O_CREAT | O_RDWR, 0o644)
        guard descriptor >= 0 else { throw ColumnStoreError.unwritable(file.path) }
        let state = NIOLockedValueBox(State.waiting)
        let lane = Background(threads: 1)
        defer { lane.shutdownWhenDone() }
        let locked = lane.run {
            // A waiter that gave up before this began has closed the descriptor.
            let begun = state.withLockedValue { state -> Bool in
                guard state == .waiting else { return false }
                state = .blocked
                return true
            }
            guard begun else { return }
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
            let before = state.withLockedValue { state -> State in
                defer { if state == .waiting || state == .blocked { state = .abandoned } }
                return state
            }
            switch before {
            // Granted before the waiter gave up, or never begun: this side lets go.
            case .held: FileLock(descriptor: descriptor).release()
            case .waiting: close(descriptor)
            case .blocked, .failed, .abandoned: break
            }
            throw error
        }
        return FileLock(descriptor: descriptor)
    }

    func release() {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}
