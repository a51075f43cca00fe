import Foundation
import NIOConcurrencyHelpers

/// How the job shows progress on long work: a bar on a terminal, a plain log
/// line every few seconds otherwise (cron, systemd, CI).
public final class Progress: Sendable {
    private struct State {
        var done = 0
        var lastPrint = Date.distantPast
    }

    /// nil when unknown: the count alone is shown.
    private let total: Int?
    private let label: String
    private let interactive: Bool
    private let enabled: Bool
    /// The job's partitions are evaluated on more than one thread.
    private let state = NIOLockedValueBox(State())

    public init(label: String, total: Int?, enabled: Bool = true) {
        self.label = label
        self.total = total.map { max($0, 1) }
        self.enabled = enabled
        self.interactive = isatty(STDERR_FILENO) == 1
    }

    public func advance(by count: Int) {
        guard enabled else { return }
        let now = Date()
        let due: Int? = state.withLockedValue { state in
            state.done += count
            guard now.timeIntervalSince(state.lastPrint) >= (interactive ? 0.1 : 5) else { return nil }
            state.lastPrint = now
            return state.done
        }
        if let due { render(done: due, final: false) }
    }

    public func finish() {
        guard enabled else { return }
        render(done: state.withLockedValue { $0.done }, final: true)
    }

    private func render(done: Int, final: Bool) {
        guard let total else {
            let line = "\(interactive ? "\r" : "")\(label): \(done) events read\(final ? ", done" : "")"
            FileHandle.standardError.write(Data((line + (interactive && !final ? "" : "\n")).utf8))
            return
        }
        let fraction = min(1, Double(done) / Double(total))
        if interactive {
            let width = 30
            let filled = Int(fraction * Double(width))
            let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
            let line = "\r\(label) \(bar) \(Int(fraction * 100))% (\(done) events)" + (final ? "\n" : "")
            FileHandle.standardError.write(Data(line.utf8))
        } else {
            let line = "\(label): \(done) events read (\(Int(fraction * 100))%)\(final ? ", done" : "")\n"
            FileHandle.standardError.write(Data(line.utf8))
        }
    }
}
