public import Foundation
import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOConcurrencyHelpers

/// Load for the fault suite (`scripts/faults`): many clients that retry the way
/// the SDK does and keep a ledger of every message the server acknowledged.
///
/// Each client sends batches of realistic messages with unique ids; a batch is
/// resent, unchanged, until the server answers 200 (on 429/503/5xx/408 after
/// `Retry-After`, else after exponential backoff with full jitter, as
/// `OnrampClient` does; on connection errors the same). Ids go to `sent` before
/// the first attempt and to `acked` after the 200, so `FaultVerify` can tell
/// what was promised from what was only tried. When `stopFile` appears (or
/// `maxDuration` passes) each client finishes its current batch, retrying for
/// up to `drainTimeout`, and stops.
public struct FaultLoad: Sendable {
    public struct Summary: Sendable, Codable {
        public var clients: Int
        public var batchSize: Int
        public var seconds: Double
        public var messagesSent: Int
        public var messagesAcknowledged: Int
        public var requests: Int
        public var retries: Int
        /// Failed attempts by kind (`http 503`, `connection`, …).
        public var failures: [String: Int]
        /// Messages the server answered 200 for but rejected to quarantine (should be 0).
        public var rejected: Int
        /// Batches given up after the drain timeout (their messages are not in `acked`).
        public var abandonedBatches: Int
        /// Longest time without any acknowledgement, and acknowledged messages per second.
        public var longestStallSeconds: Double
        public var acknowledgedPerSecond: Double
        /// Time of the attempt the server acknowledged, median and 99th percentile.
        public var p50Milliseconds: Double
        public var p99Milliseconds: Double
    }

    public var url: String
    /// Write keys by app; client i sends app i mod apps' messages with that app's key.
    public var keys: [(app: String, key: String)]
    public var clients: Int
    public var batchSize: Int
    public var idPrefix: String
    public var ledgerDirectory: URL
    public var stopFile: URL?
    public var maxDuration: Duration
    public var drainTimeout: Duration
    public var retryBaseDelay: Duration = .milliseconds(200)
    public var maxRetryDelay: Duration = .seconds(3)

    public init(
        url: String, keys: [(app: String, key: String)], clients: Int, batchSize: Int, idPrefix: String, ledgerDirectory: URL,
        stopFile: URL?, maxDuration: Duration, drainTimeout: Duration
    ) {
        self.url = url
        self.keys = keys
        self.clients = clients
        self.batchSize = batchSize
        self.idPrefix = idPrefix
        self.ledgerDirectory = ledgerDirectory
        self.stopFile = stopFile
        self.maxDuration = maxDuration
        self.drainTimeout = drainTimeout
    }

    fileprivate struct Shared: Sendable {
        var requests = 0
        var retries = 0
        var failures: [String: Int] = [:]
        var rejected = 0
        var abandoned = 0
        var sent = 0
        var acked = 0
        var lastAck = ContinuousClock.now
        var longestStall: Duration = .zero
        var latencies: [Double] = []
    }

    public func run() async throws -> Summary {
        guard !keys.isEmpty else { throw BenchError("no write keys") }
        try FileManager.default.createDirectory(at: ledgerDirectory, withIntermediateDirectories: true)
        let pid = ProcessInfo.processInfo.processIdentifier
        let sentLedger = try Ledger(ledgerDirectory.appendingPathComponent("sent-\(idPrefix)-\(pid).tsv"))
        let ackedLedger = try Ledger(ledgerDirectory.appendingPathComponent("acked-\(idPrefix)-\(pid).tsv"))
        let factory = MessageFactory(devicePrefix: "f\(idPrefix)")
        let shared = SharedTally()
        let started = ContinuousClock.now
        let stopAt = started + maxDuration
        let client = LoadGenerator.makeClient(connections: clients)
        let stopFile = self.stopFile
        @Sendable func stopping() -> Bool {
            ContinuousClock.now >= stopAt || (stopFile.map { FileManager.default.fileExists(atPath: $0.path) } ?? false)
        }
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<clients {
                let (app, key) = keys[index % keys.count]
                let templates = factory.byApp[app] ?? factory.templates
                group.addTask {
                    await runClient(
                        index: index, app: app, key: key, templates: templates, client: client, shared: shared, sent: sentLedger,
                        acked: ackedLedger, stopping: stopping)
                }
            }
        }
        try? await client.shutdown()
        sentLedger.close()
        ackedLedger.close()
        let seconds = (ContinuousClock.now - started).seconds
        return shared.state.withLockedValue { s in
            let sorted = s.latencies.sorted()
            func percentile(_ p: Double) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(p * Double(sorted.count)))] }
            return Summary(
                clients: clients, batchSize: batchSize, seconds: seconds, messagesSent: s.sent, messagesAcknowledged: s.acked,
                requests: s.requests, retries: s.retries, failures: s.failures, rejected: s.rejected, abandonedBatches: s.abandoned,
                longestStallSeconds: s.longestStall.seconds, acknowledgedPerSecond: Double(s.acked) / seconds,
                p50Milliseconds: percentile(0.5), p99Milliseconds: percentile(0.99))
        }
    }

    private func runClient(
        index: Int, app: String, key: String, templates: [MessageFactory.Template], client: HTTPClient, shared: SharedTally,
        sent: Ledger, acked: Ledger, stopping: @Sendable () -> Bool
    ) async {
        let authorization = "Basic " + Data((key + ":").utf8).base64EncodedString()
        var cursor = (index * 7_919) % max(1, templates.count)
        var sequence = 0
        while !stopping() {
            var items: [(MessageFactory.Template, String)] = []
            for _ in 0..<batchSize {
                items.append((templates[cursor], "\(idPrefix)-\(index)-\(sequence)"))
                cursor = (cursor + 1) % templates.count
                sequence += 1
            }
            let lines = items.map { "\(app)\t\($0.1)\n" }.joined()
            sent.write(lines)
            shared.state.withLockedValue { $0.sent += items.count }
            let body = MessageFactory.batchBody(items, sentAt: MessageFactory.iso8601(Date()))
            var attempt = 0
            var drainDeadline: ContinuousClock.Instant?
            while true {
                let attemptStarted = ContinuousClock.now
                let outcome = await send(body, authorization: authorization, client: client)
                shared.state.withLockedValue { $0.requests += 1 }
                if case .acknowledged(let rejected) = outcome {
                    acked.write(lines)
                    let now = ContinuousClock.now
                    shared.state.withLockedValue { s in
                        s.latencies.append((now - attemptStarted).seconds * 1_000)
                        s.acked += items.count
                        s.rejected += rejected
                        s.longestStall = max(s.longestStall, now - s.lastAck)
                        s.lastAck = now
                    }
                    break
                }
                attempt += 1
                var wait: Duration = backoff(attempt: attempt)
                switch outcome {
                case .retry(let kind, let after):
                    if let after { wait = after }
                    shared.state.withLockedValue { s in
                        s.retries += 1
                        s.failures[kind, default: 0] += 1
                    }
                case .acknowledged: break
                }
                if stopping() {
                    let deadline = drainDeadline ?? (ContinuousClock.now + drainTimeout)
                    drainDeadline = deadline
                    if ContinuousClock.now >= deadline {
                        shared.state.withLockedValue { $0.abandoned += 1 }
                        return
                    }
                }
                try? await Task.sleep(for: wait)
            }
        }
    }

    private enum Outcome {
        case acknowledged(rejected: Int)
        case retry(String, Duration?)
    }

    private func send(_ body: [UInt8], authorization: String, client: HTTPClient) async -> Outcome {
        var request = HTTPClientRequest(url: url + "/v1/batch")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Authorization", value: authorization)
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let response = try await client.execute(request, timeout: .seconds(30))
            let buffer = try await response.body.collect(upTo: 1 << 20)
            let status = Int(response.status.code)
            if status == 200 {
                let json = (try? JSONSerialization.jsonObject(with: Data(buffer.readableBytesView))) as? [String: Any]
                let rejected = (json?["rejected"] as? [Any])?.count ?? 0
                return .acknowledged(rejected: rejected)
            }
            let after = response.headers.first(name: "Retry-After").flatMap(Double.init).map { Duration.milliseconds(Int($0 * 1_000)) }
            // A 503 must say when to come back; one that does not is counted apart.
            if status == 503 && after == nil { return .retry("http 503 without Retry-After", nil) }
            // Anything else is retried too: 429/503/5xx/408 as the SDK does, and a 4xx
            // here would be a bug the ledger comparison then shows as a stall.
            return .retry("http \(status)", after)
        } catch {
            return .retry("connection", nil)
        }
    }

    /// Exponential backoff with full jitter, as `OnrampClient` does.
    private func backoff(attempt: Int) -> Duration {
        let base = retryBaseDelay.seconds
        let ceiling = min(maxRetryDelay.seconds, base * pow(2, Double(attempt - 1)))
        return .milliseconds(Int(Double.random(in: 0...ceiling) * 1_000))
    }
}

/// The counters every client of one run adds to.
private final class SharedTally: Sendable {
    let state = NIOLockedValueBox(FaultLoad.Shared())
}

/// An append-only text file shared by the clients of one process.
final class Ledger: Sendable {
    private let handle: NIOLockedValueBox<FileHandle?>

    init(_ url: URL) throws {
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        handle = NIOLockedValueBox(try FileHandle(forWritingTo: url))
    }

    func write(_ text: String) {
        handle.withLockedValue { h in
            h?.write(Data(text.utf8))
        }
    }

    func close() {
        handle.withLockedValue { h in
            try? h?.close()
            h = nil
        }
    }
}
