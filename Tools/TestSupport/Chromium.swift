public import Foundation
import LocalPostgres

/// Debian's headless Chromium, driven from tests: the dashboard's pages and
/// the browser ingestion test load in it.
public enum Chromium {
    public struct Run: Sendable {
        public var status: Int32
        public var dom: String
        public var stderr: String
        public var consoleLines: [String] {
            stderr.split(separator: "\n").map(String.init).filter { $0.contains(":CONSOLE") || $0.contains("Uncaught") }
        }
    }

    public static let flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
        "--enable-logging=stderr", "--v=0",
    ]

    public static let canaryPage = """
        <!DOCTYPE html><html><head><meta charset="utf-8">
        <meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'">
        </head><body><img src="https://example.invalid/x.png">
        <script>console.error("onramp-canary-error"); notDefined();</script></body></html>
        """

    /// `$CHROMIUM`, else `chromium` or `chromium-browser` on the PATH.
    public static func executable() -> String? {
        let environment = ProcessInfo.processInfo.environment
        if let explicit = environment["CHROMIUM"], FileManager.default.isExecutableFile(atPath: explicit) { return explicit }
        let path = (environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":")
        for name in ["chromium", "chromium-browser"] {
            for directory in path {
                let candidate = "\(directory)/\(name)"
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            }
        }
        return nil
    }

    public struct TimedOut: Error, CustomStringConvertible {
        public let description: String
    }

    /// Loads `page` (a file or an http URL) and returns the serialized DOM after
    /// load, with a 120 s limit; `extraFlags` such as `--virtual-time-budget=MS`
    /// let the page's scripts and network requests settle first.
    public static func dumpDOM(_ browser: String, _ page: URL, profile: URL, extraFlags: [String] = []) async throws -> Run {
        let scratch = FileManager.default.temporaryDirectory
        let output = scratch.appendingPathComponent("onramp-chromium-\(UUID().uuidString).out")
        let errors = scratch.appendingPathComponent("onramp-chromium-\(UUID().uuidString).err")
        guard FileManager.default.createFile(atPath: output.path, contents: nil),
              FileManager.default.createFile(atPath: errors.path, contents: nil) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: scratch.path])
        }
        defer {
            try? FileManager.default.removeItem(at: output)
            try? FileManager.default.removeItem(at: errors)
        }
        // Its own process group, polled without blocking: Chromium's helpers
        // can outlive it, and they go with it, whether it finishes or not. The
        // group is stopped before the child is reaped (its pid still taken),
        // and a child left running by an error is stopped and reaped too.
        let child = try ChildProcess.start(
            [browser] + flags + extraFlags + ["--user-data-dir=\(profile.path)", "--dump-dom", page.absoluteString],
            outputPath: output.path, errorPath: errors.path, ownGroup: true)
        var reaped = false
        defer {
            if !reaped {
                child.stopGroup()
                _ = try? child.wait()
            }
        }
        let deadline = ContinuousClock.now + .seconds(120)
        while true {
            let exited = try child.hasExited()
            if exited || ContinuousClock.now > deadline {
                child.stopGroup()
                let exit = try child.wait()
                reaped = true
                guard exited else { throw TimedOut(description: "chromium did not finish loading \(page.absoluteString) within 120 s") }
                return Run(
                    status: exit.status,
                    dom: (try? String(contentsOf: output, encoding: .utf8)) ?? "",
                    stderr: (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
                )
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

