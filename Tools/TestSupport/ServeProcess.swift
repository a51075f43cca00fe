public import Foundation

/// A running `onramp serve` on a port the kernel chose (`--port 0`), read from
/// the server's own "listening" log line. A port picked at random can be held
/// by any of the suite's many client sockets, and a server that cannot bind
/// exits; this way it never has to guess, and a server that does exit says why.
public final class ServeProcess {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    public let process: Process
    public let port: Int
    /// The port of `/metrics`, on a listener of its own (`--metrics-listen`); nil when off.
    public let metricsPort: Int?
    public var base: URL { URL(string: "http://127.0.0.1:\(port)") ?? URL(fileURLWithPath: "/") }
    public var metricsURL: URL? { metricsPort.flatMap { URL(string: "http://127.0.0.1:\($0)/metrics") } }
    private let log: URL

    private init(process: Process, port: Int, metricsPort: Int?, log: URL) {
        self.process = process
        self.port = port
        self.metricsPort = metricsPort
        self.log = log
    }

    /// Starts `onramp serve` with `arguments` (everything but `--port`) and
    /// waits, up to two minutes as a server starting beside the whole suite
    /// can take, until it listens.
    public static func start(_ arguments: [String]) async throws -> ServeProcess {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("onramp-serve-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let process = Process()
        process.executableURL = OnrampBinary.url
        // Metrics on a port of their own too, unless the test says where: many servers run at once.
        let ownMetrics = !arguments.contains("--metrics-listen")
        process.arguments = ["serve"] + arguments + ["--port", "0"] + (ownMetrics ? ["--metrics-listen", "127.0.0.1:0"] : [])
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: log)
        try process.run()
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if let port = listeningPort(in: text) {
                let metricsPort = listeningPort(in: text, of: "onramp metrics listening")
                if !ownMetrics || metricsPort != nil { return ServeProcess(process: process, port: port, metricsPort: metricsPort, log: log) }
            }
            if !process.isRunning {
                try? FileManager.default.removeItem(at: log)
                throw Failure(description: "onramp serve exited (\(process.terminationStatus)) before listening:\n\(text)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: log)
        throw Failure(description: "onramp serve did not listen within two minutes:\n\(text)")
    }

    /// The port of the line `… port=N [IngestServer] onramp serve listening` (or another `what`).
    static func listeningPort(in log: String, of what: String = "onramp serve listening") -> Int? {
        for line in log.split(separator: "\n") where line.hasSuffix(what) {
            guard let field = line.split(separator: " ").first(where: { $0.hasPrefix("port=") }) else { continue }
            return Int(field.dropFirst("port=".count))
        }
        return nil
    }

    /// What the server has logged so far.
    public var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// SIGTERM, then waits for the exit (a graceful shutdown).
    public func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: log)
    }

    deinit { stop() }
}
