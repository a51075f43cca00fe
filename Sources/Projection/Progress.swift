import Foundation

/// How the job shows progress on long work: a bar on a terminal, a plain log
/// line every few seconds otherwise (cron, systemd, CI).
public final class Progress: @unchecked Sendable {
    // Used from the one thread running the job; @unchecked because the job is
    // synchronous and the counters are never shared.
    private let total: Int
    private var done = 0
    private let label: String
    private let interactive: Bool
    private var lastPrint = Date.distantPast
    private let enabled: Bool

    public init(label: String, total: Int, enabled: Bool = true) {
        self.label = label
        self.total = max(total, 1)
        self.enabled = enabled
        self.interactive = isatty(STDERR_FILENO) == 1
    }

    public func advance(by count: Int) {
        guard enabled else { return }
        done += count
        let now = Date()
        guard now.timeIntervalSince(lastPrint) >= (interactive ? 0.1 : 5) else { return }
        lastPrint = now
        render(final: false)
    }

    public func finish() {
        guard enabled else { return }
        done = max(done, 0)
        render(final: true)
    }

    private func render(final: Bool) {
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
