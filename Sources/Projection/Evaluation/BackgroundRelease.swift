import Dispatch

/// Frees a run's large values on another thread. The day's events and the
/// touched persons are hundreds of thousands of small arrays and strings at
/// 10 M events; freed where the run let go of them, on its own thread,
/// they kept its session idle (50 ms before the commit alone) while the
/// other core had nothing to do.
enum BackgroundRelease {
    private static let queue = DispatchQueue(label: "onramp.background-release", qos: .utility)

    /// Takes `value`, and lets go of it on the release queue: the last
    /// reference to its storage ends there, not on the caller's thread.
    static func drop<Value: Sendable>(_ value: consuming Value) {
        queue.async { [value] in withExtendedLifetime(value) {} }
    }
}
