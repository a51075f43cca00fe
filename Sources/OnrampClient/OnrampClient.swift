public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Onramp's client SDK: Segment's wire format, an on-disk queue, batched
/// delivery with retries. Foundation only, for iOS, macOS and Linux apps.
///
/// ```swift
/// let analytics = try OnrampClient(configuration: .init(writeKey: "ork_…", host: URL(string: "https://onramp.example.com")!))
/// analytics.track("otp_verified", properties: ["attempt": 1])
/// analytics.identify(userId: "user-42")
/// await analytics.flush()
/// ```
///
/// `track`, `screen` and `identify` persist the message before they return;
/// delivery happens in the background when `flushAt` messages are queued, every
/// `flushInterval`, and on `flush()`. Failed deliveries retry with exponential
/// backoff and jitter, honouring `Retry-After`; messages the server rejects are
/// dropped with a log line rather than retried forever.
public final class OnrampClient: Sendable {
    public struct Configuration: Sendable {
        public var writeKey: String
        /// The server: batches go to `host/v1/batch`.
        public var host: URL
        /// Where the queue and the anonymous id live (default: Application Support / a temp dir on Linux).
        public var storageDirectory: URL?
        /// Flush when this many messages are queued.
        public var flushAt: Int = 20
        /// Flush at least this often while messages are queued (nil: only by count or `flush()`).
        public var flushInterval: Duration? = .seconds(30)
        /// Messages per request.
        public var maxBatchSize: Int = 100
        /// Oldest messages are dropped (and counted) beyond this.
        public var maxQueueSize: Int = 10_000
        /// First retry delay; doubles up to `maxRetryDelay`, with full jitter.
        public var retryBaseDelay: Duration = .milliseconds(500)
        public var maxRetryDelay: Duration = .seconds(60)
        /// Attempts per `flush()` before it gives up until the next one.
        public var maxAttemptsPerFlush: Int = 6
        /// The device's clock, used for timestamps and `sentAt` (a simulator may skew it).
        public var clock: @Sendable () -> Date = { Date() }
        /// Merged into every message's `context` (e.g. `["app": ["version": "2.3.0"]]`).
        public var context: [String: JSONValue] = [:]
        /// Use this anonymous id instead of the stored or a new one.
        public var anonymousId: String?
        public var session: URLSession = .shared
        /// Where delivery problems are reported (default: stderr).
        public var log: @Sendable (String) -> Void = { message in
            FileHandle.standardError.write(Data("[onramp] \(message)\n".utf8))
        }

        public init(writeKey: String, host: URL) {
            self.writeKey = writeKey
            self.host = host
        }
    }

    /// Delivery counters, for tests and diagnostics.
    public struct Statistics: Sendable, Equatable {
        public var queued: Int
        public var delivered: Int
        public var rejected: Int
        public var dropped: Int
        public var failedAttempts: Int
    }

    public let configuration: Configuration
    public let anonymousId: String
    private let queue: DiskQueue
    private let state = Locked(State())
    private let flushLock = FlushGate()

    private struct State {
        var userId: String?
        var delivered = 0
        var rejected = 0
        var failedAttempts = 0
        var timer: Task<Void, Never>?
        var pendingFlush: Task<Void, Never>?
    }

    public init(configuration: Configuration) throws {
        self.configuration = configuration
        let directory = configuration.storageDirectory ?? Self.defaultDirectory(writeKey: configuration.writeKey)
        queue = try DiskQueue(directory: directory.appendingPathComponent("queue"), maxCount: configuration.maxQueueSize)
        let idFile = directory.appendingPathComponent("anonymous-id")
        if let given = configuration.anonymousId {
            anonymousId = given
        } else if let stored = try? String(contentsOf: idFile, encoding: .utf8), !stored.isEmpty {
            anonymousId = stored
        } else {
            anonymousId = UUID().uuidString.lowercased()
            try anonymousId.write(to: idFile, atomically: true, encoding: .utf8)
        }
        let userFile = directory.appendingPathComponent("user-id")
        if let user = try? String(contentsOf: userFile, encoding: .utf8), !user.isEmpty {
            state.withLock { $0.userId = user }
        }
        if let interval = configuration.flushInterval {
            let timer = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    guard let self else { return }
                    await self.flush()
                }
            }
            state.withLock { $0.timer = timer }
        }
    }

    deinit {
        state.withLock { $0.timer?.cancel() }
    }

    // MARK: Tracking

    /// Records a named event (`otp_verified`).
    public func track(_ event: String, properties: [String: JSONValue] = [:], timestamp: Date? = nil) {
        enqueue(type: "track", event: event, name: nil, properties: properties, traits: nil, timestamp: timestamp)
    }

    /// Records a screen view (`welcome`).
    public func screen(_ name: String, properties: [String: JSONValue] = [:], timestamp: Date? = nil) {
        enqueue(type: "screen", event: nil, name: name, properties: properties, traits: nil, timestamp: timestamp)
    }

    /// Links this device to a user; later messages carry the user id too.
    public func identify(userId: String, traits: [String: JSONValue] = [:], timestamp: Date? = nil) {
        state.withLock { $0.userId = userId }
        let directory = queue.directory.deletingLastPathComponent()
        try? userId.write(to: directory.appendingPathComponent("user-id"), atomically: true, encoding: .utf8)
        enqueue(type: "identify", event: nil, name: nil, properties: nil, traits: traits, timestamp: timestamp)
    }

    public var statistics: Statistics {
        state.withLock {
            Statistics(
                queued: queue.count, delivered: $0.delivered, rejected: $0.rejected, dropped: queue.dropped,
                failedAttempts: $0.failedAttempts)
        }
    }

    private func enqueue(
        type: String, event: String?, name: String?, properties: [String: JSONValue]?, traits: [String: JSONValue]?,
        timestamp: Date?
    ) {
        var context = configuration.context
        context["library"] = ["name": "onramp-swift", "version": "1.0.0"]
        let message = Message(
            type: type, event: event, name: name, messageId: UUID().uuidString.lowercased(), anonymousId: anonymousId,
            userId: state.withLock { $0.userId }, timestamp: ISO8601.string(timestamp ?? configuration.clock()),
            properties: properties, traits: traits, context: context)
        do {
            try queue.append(message)
        } catch {
            configuration.log("could not persist a \(type) message: \(error)")
        }
        if queue.count >= configuration.flushAt { scheduleFlush() }
    }

    private func scheduleFlush() {
        state.withLock { s in
            guard s.pendingFlush == nil else { return }
            s.pendingFlush = Task { [weak self] in
                await self?.flush()
                self?.state.withLock { $0.pendingFlush = nil }
            }
        }
    }

    // MARK: Delivery

    /// Sends everything queued. Returns when the queue is empty or the server
    /// keeps failing (the messages stay queued for the next flush).
    public func flush() async {
        await flushLock.run { await self.deliverQueued() }
    }

    private func deliverQueued() async {
        var attempt = 0
        var batchSize = configuration.maxBatchSize
        while true {
            let items = queue.peek(batchSize)
            guard !items.isEmpty else { return }
            switch await send(items.map(\.1)) {
            case .delivered(let rejected):
                for rejection in rejected {
                    configuration.log("server rejected message \(rejection.messageId ?? "?"): \(rejection.code ?? "") \(rejection.message ?? "")")
                }
                queue.remove(items.map(\.0))
                state.withLock {
                    $0.delivered += items.count - rejected.count
                    $0.rejected += rejected.count
                }
                attempt = 0
            case .refused(let reason):
                configuration.log("server refused a batch of \(items.count) (\(reason)); dropping it")
                queue.remove(items.map(\.0))
                state.withLock { $0.rejected += items.count }
            case .tooLarge:
                if batchSize == 1 {
                    configuration.log("a single message is larger than the server accepts; dropping it")
                    queue.remove(items.map(\.0))
                    state.withLock { $0.rejected += 1 }
                } else {
                    batchSize = max(1, batchSize / 2)
                }
            case .retry(let after):
                attempt += 1
                state.withLock { $0.failedAttempts += 1 }
                guard attempt < configuration.maxAttemptsPerFlush else { return }
                try? await Task.sleep(for: after ?? backoff(attempt: attempt))
            }
        }
    }

    /// Exponential backoff with full jitter.
    func backoff(attempt: Int) -> Duration {
        let base = Double(configuration.retryBaseDelay.components.seconds) + Double(configuration.retryBaseDelay.components.attoseconds) / 1e18
        let cap = Double(configuration.maxRetryDelay.components.seconds)
        let ceiling = min(cap, base * pow(2, Double(attempt - 1)))
        return .milliseconds(Int(Double.random(in: 0...ceiling) * 1000))
    }

    private enum Outcome {
        case delivered([BatchResponse.Rejection])
        case refused(String)
        case tooLarge
        case retry(Duration?)
    }

    private func send(_ messages: [Message]) async -> Outcome {
        var request = URLRequest(url: configuration.host.appendingPathComponent("v1/batch"))
        request.httpMethod = "POST"
        request.setValue("application/json; charset=utf-8", forHTTPHeaderField: "Content-Type")
        let credentials = Data("\(configuration.writeKey):".utf8).base64EncodedString()
        request.setValue("Basic \(credentials)", forHTTPHeaderField: "Authorization")
        request.timeoutInterval = 30
        let envelope = BatchEnvelope(batch: messages, sentAt: ISO8601.string(configuration.clock()), writeKey: configuration.writeKey)
        do {
            request.httpBody = try JSONEncoder().encode(envelope)
            let (data, response) = try await configuration.session.data(for: request)
            guard let http = response as? HTTPURLResponse else { return .retry(nil) }
            switch http.statusCode {
            case 200..<300:
                let body = try? JSONDecoder().decode(BatchResponse.self, from: data)
                return .delivered(body?.rejected ?? [])
            case 413:
                return .tooLarge
            case 429, 503, 500..<600, 408:
                let after = http.value(forHTTPHeaderField: "Retry-After").flatMap(Double.init).map { Duration.milliseconds(Int($0 * 1000)) }
                configuration.log("delivery deferred: HTTP \(http.statusCode)")
                return .retry(after)
            case 401:
                // A wrong or revoked key will not fix itself by resending; keep the data for a fixed key.
                configuration.log("write key refused (401); keeping \(messages.count) messages queued")
                return .retry(.seconds(60))
            default:
                return .refused("HTTP \(http.statusCode): \(String(decoding: data.prefix(300), as: UTF8.self))")
            }
        } catch {
            configuration.log("delivery failed: \(error.localizedDescription)")
            return .retry(nil)
        }
    }

    static func defaultDirectory(writeKey: String) -> URL {
        let base = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSTemporaryDirectory())
        let tag = String(writeKey.prefix(12)).filter { $0.isLetter || $0.isNumber || $0 == "_" }
        return base.appendingPathComponent("onramp").appendingPathComponent(tag.isEmpty ? "default" : tag)
    }
}

/// Lets one flush run at a time; later callers wait for it and then run their own.
final class FlushGate: Sendable {
    private let running = Locked<Task<Void, Never>?>(nil)

    func run(_ body: @escaping @Sendable () async -> Void) async {
        let task = running.withLock { current -> Task<Void, Never> in
            let previous = current
            let next = Task {
                await previous?.value
                await body()
            }
            current = next
            return next
        }
        await task.value
    }
}
