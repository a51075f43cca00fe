import Dispatch

/// Frees a run's large values on another thread. The day's events and the
/// touched persons can be hundreds of thousands of small arrays and strings;
/// freed where the run lets go of them, on its own thread, they would keep
/// its session idle (even just before the commit) while the other core has
/// nothing to do.
enum BackgroundRelease {
    private static let queue = DispatchQueue(label: "onramp.background-release", qos: .utility)

    /// Takes `value`, and lets go of it on the release queue: the last
    /// reference to its storage ends there, not on the caller's thread.
    static func drop<Value: Sendable>(_ value: consuming Value) {
        queue.async { [value] in withExtendedLifetime(value) {} }
    }
}
