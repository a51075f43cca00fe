public import Foundation

/// A real receiver of audiences' deliveries for tests: scripts/lib/audience_receiver.py
/// in its own process, checking every signature with `secret` and logging
/// each batch, taking the given actions in turn (die mid-batch, answer 500, 429…).
public struct AudienceReceiver {
    let process: Process
    public let port: Int

    public init(port: Int, log: URL, actions: [String] = []) throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/lib/audience_receiver.py")
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script.path, String(port), log.path] + actions
        process.environment = ["ONRAMP_DELIVERY_SECRET": AudienceReceiver.secret, "PATH": "/usr/bin:/bin"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        // `listening PORT`, once it listens.
        let line = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
        guard let bound = Int(line.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") else {
            throw ReceiverError(description: "the receiver did not start: '\(line)'")
        }
        self.port = bound
    }

    /// Waits (a while) for the receiver to have exited on its own.
    public func exited() async throws {
        for _ in 0..<100 where process.isRunning { try await Task.sleep(for: .milliseconds(100)) }
        guard !process.isRunning else { throw ReceiverError(description: "the receiver is still running") }
    }

    /// Kills it (SIGKILL: a child may inherit SIGTERM blocked) and waits for it to be gone.
    public func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        for _ in 0..<100 where process.isRunning { usleep(50_000) }
    }

    public static let secret = "s3cret-for-the-test"

    public struct ReceiverError: Error, CustomStringConvertible {
        public var description: String
    }

    /// What the receiver read, batch by batch: the signature's verdict and the changes.
    public static func received(_ log: URL) throws -> [(valid: Bool, changes: [[String: Any]])] {
        guard let text = try? String(contentsOf: log, encoding: .utf8) else { return [] }
        return try text.split(separator: "\n").map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
            let body = object["body"] as? [String: Any] ?? [:]
            return (object["valid"] as? Bool ?? false, body["changes"] as? [[String: Any]] ?? [])
        }
    }
}
