public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Onramp's client SDK: Segment's wire format, an on-disk queue, batched
/// delivery with retries. Foundation only, for iOS, macOS, tvOS, watchOS and
/// Linux apps.
///
/// ```swift
/// let analytics = try OnrampClient(configuration: .init(writeKey: "ork_…", host: URL(string: "https://onramp.example.com")!))
/// analytics.track("otp_verified", properties: ["attempt": 1])
/// analytics.identify(userId: "user-42")
/// ```
///
/// Every message carries the device's context (library, os, device, app,
/// locale, timezone) unless the app turns it off; what the app sets in
/// `Configuration.context` overrides it. Lifecycle events (`Application
/// Installed`, `Updated`, `Opened`, `Backgrounded`) are sent unless turned off,
/// and going to the background flushes.
///
/// Each call persists its message before it returns; delivery happens in the
/// background when `flushAt` messages are queued, every `flushInterval`, and on
/// `flush()`. Failed deliveries retry with exponential backoff and jitter,
/// honouring `Retry-After`; a message the server rejects is dropped with a log
/// line, never the batch it came in.
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
        /// Laid over every message's `context`, object by object: `["app": ["version": "2.3.0"]]`
        /// replaces the automatic `app.version` and keeps the rest.
        public var context: [String: JSONValue] = [:]
        /// Fill `library`, `os`, `device`, `app`, `locale` and `timezone` automatically.
        public var automaticContext = true
        /// The app's name, version, build and bundle id (default: from the main bundle).
        public var application: ApplicationInfo = ApplicationInfo(bundle: .main)
        /// Send Segment's application lifecycle events.
        public var trackApplicationLifecycleEvents = true
        /// Flush when the app goes to the background (where UIKit or AppKit say so).
        public var flushOnBackground = true
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

    /// The SDK's version, sent as `context.library.version`.
    public static let version = "1.1.0"

    /// Delivery counters, for tests and diagnostics.
    public struct Statistics: Sendable, Equatable {
        public var queued: Int
        public var delivered: Int
        public var rejected: Int
        /// Dropped because the queue was full (the oldest first).
        public var dropped: Int
        public var failedAttempts: Int
        /// Queue files that could not be read or decoded, moved to `queue/set-aside/`.
        public var setAside: Int
        /// Messages whose write to disk failed, held in memory until a write succeeds.
        public var inMemory: Int
    }

    public let configuration: Configuration
    private let directory: URL
    private let queue: DiskQueue
    private let state: Locked<State>
    private let flushLock = FlushGate()
    /// The automatic context with the app's laid over it, made once.
    private let context: [String: JSONValue]
    private let observers = Locked<[ObserverToken]>([])

    private struct State {
        var anonymousId: String
        var userId: String?
        var traits: [String: JSONValue] = [:]
        var enabled = true
        var delivered = 0
        var rejected = 0
        var failedAttempts = 0
        var timer: Task<Void, Never>?
        var pendingFlush: Task<Void, Never>?
    }

    public init(configuration: Configuration) throws {
        self.configuration = configuration
        directory = configuration.storageDirectory ?? Self.defaultDirectory(writeKey: configuration.writeKey)
        queue = try DiskQueue(directory: directory.appendingPathComponent("queue"), maxCount: configuration.maxQueueSize, log: configuration.log)
        let automatic = configuration.automaticContext ? AutomaticContext.collect(application: configuration.application) : [:]
        context = automatic.merging(overrides: configuration.context)
        let anonymousId: String
        if let given = configuration.anonymousId {
            anonymousId = given
        } else if let stored = Self.readText(directory, .anonymousId) {
            anonymousId = stored
        } else {
            anonymousId = UUID().uuidString.lowercased()
            try anonymousId.write(to: directory.appendingPathComponent(StoredFile.anonymousId.rawValue), atomically: true, encoding: .utf8)
        }
        var initial = State(anonymousId: anonymousId)
        initial.userId = Self.readText(directory, .userId)
        if let data = try? Data(contentsOf: directory.appendingPathComponent(StoredFile.traits.rawValue)),
           let traits = try? JSONDecoder().decode([String: JSONValue].self, from: data) {
            initial.traits = traits
        }
        initial.enabled = !FileManager.default.fileExists(atPath: directory.appendingPathComponent(StoredFile.optedOut.rawValue).path)
        state = Locked(initial)
        if configuration.trackApplicationLifecycleEvents { trackLaunch() }
        observeLifecycle()
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
        for observer in observers.withLock({ $0 }) { NotificationCenter.default.removeObserver(observer.token) }
    }

    // MARK: Identity

    /// The device's anonymous id; `reset()` starts a new one.
    public var anonymousId: String { state.withLock { $0.anonymousId } }

    /// The user `identify` or `alias` named, until `reset()`.
    public var userId: String? { state.withLock { $0.userId } }

    /// The user's traits as `identify` calls accumulated them, until `reset()`.
    public var traits: [String: JSONValue] { state.withLock { $0.traits } }

    /// Whether the client collects and sends. Set to false when the user opts
    /// out: calls record nothing and nothing queued is sent until it is set to
    /// true again. Kept across launches.
    public var isEnabled: Bool {
        get { state.withLock { $0.enabled } }
        set {
            state.withLock { $0.enabled = newValue }
            let file = directory.appendingPathComponent(StoredFile.optedOut.rawValue)
            if newValue {
                try? FileManager.default.removeItem(at: file)
            } else {
                _ = FileManager.default.createFile(atPath: file.path, contents: Data())
            }
        }
    }

    // MARK: Tracking

    /// Records a named event (`otp_verified`).
    public func track(_ event: String, properties: [String: JSONValue] = [:], timestamp: Date? = nil) {
        enqueue(type: "track", event: event, properties: properties, timestamp: timestamp)
    }

    /// Records a screen view (`welcome`).
    public func screen(_ name: String, properties: [String: JSONValue] = [:], timestamp: Date? = nil) {
        enqueue(type: "screen", name: name, properties: properties, timestamp: timestamp)
    }

    /// Links this device to a user; later messages carry the user id too. Traits
    /// accumulate across calls (a later value for a key replaces the earlier).
    public func identify(userId: String, traits: [String: JSONValue] = [:], timestamp: Date? = nil) {
        guard isEnabled else { return }
        let all = state.withLock { s -> [String: JSONValue] in
            s.userId = userId
            s.traits.merge(traits) { $1 }
            return s.traits
        }
        store(userId: userId, traits: all)
        enqueue(type: "identify", traits: traits, timestamp: timestamp)
    }

    /// Tells the server that `newId` is the same user as the current one (the
    /// user id, else the anonymous id); later messages carry `newId`.
    public func alias(_ newId: String, timestamp: Date? = nil) {
        guard isEnabled else { return }
        let previous = state.withLock { $0.userId ?? $0.anonymousId }
        enqueue(type: "alias", previousId: previous, userId: newId, timestamp: timestamp)
        state.withLock { $0.userId = newId }
        store(userId: newId, traits: traits)
    }

    /// Associates the user with a group (an account, a team) and its traits.
    public func group(_ groupId: String, traits: [String: JSONValue] = [:], timestamp: Date? = nil) {
        enqueue(type: "group", traits: traits, groupId: groupId, timestamp: timestamp)
    }

    /// Logout: forgets the user id and traits and starts a new anonymous id, so
    /// the next person on this device is someone else. Queued messages keep
    /// the ids they were recorded with.
    public func reset() {
        let fresh = UUID().uuidString.lowercased()
        state.withLock { s in
            s.anonymousId = fresh
            s.userId = nil
            s.traits = [:]
        }
        try? fresh.write(to: directory.appendingPathComponent(StoredFile.anonymousId.rawValue), atomically: true, encoding: .utf8)
        for file in [StoredFile.userId, .traits] { try? FileManager.default.removeItem(at: directory.appendingPathComponent(file.rawValue)) }
    }

    public var statistics: Statistics {
        state.withLock {
            Statistics(
                queued: queue.count, delivered: $0.delivered, rejected: $0.rejected, dropped: queue.dropped,
                failedAttempts: $0.failedAttempts, setAside: queue.setAside, inMemory: queue.inMemory)
        }
    }

    private func enqueue(
        type: String, event: String? = nil, name: String? = nil, properties: [String: JSONValue]? = nil,
        traits: [String: JSONValue]? = nil, previousId: String? = nil, userId: String? = nil, groupId: String? = nil,
        timestamp: Date?
    ) {
        guard let ids = state.withLock({ s in s.enabled ? (s.anonymousId, userId ?? s.userId) : nil }) else { return }
        let message = Message(
            type: type, event: event, name: name, messageId: UUID().uuidString.lowercased(), anonymousId: ids.0,
            userId: ids.1, previousId: previousId, groupId: groupId, timestamp: ISO8601.string(timestamp ?? configuration.clock()),
            properties: properties, traits: traits, context: context)
        queue.append(message)
        if queue.count >= configuration.flushAt { scheduleFlush() }
    }

    /// The files beside the queue that keep the client's identity and switches across launches.
    private enum StoredFile: String {
        case anonymousId = "anonymous-id"
        case userId = "user-id"
        case traits = "traits.json"
        case optedOut = "opted-out"
        case appVersion = "app-version.json"
    }

    private static func readText(_ directory: URL, _ file: StoredFile) -> String? {
        guard let text = try? String(contentsOf: directory.appendingPathComponent(file.rawValue), encoding: .utf8), !text.isEmpty else {
            return nil
        }
        return text
    }

    private func store(userId: String, traits: [String: JSONValue]) {
        try? userId.write(to: directory.appendingPathComponent(StoredFile.userId.rawValue), atomically: true, encoding: .utf8)
        if let data = try? JSONEncoder().encode(traits) {
            try? data.write(to: directory.appendingPathComponent(StoredFile.traits.rawValue), options: [.atomic])
        }
    }

    // MARK: Lifecycle

    /// `Application Installed` or `Updated`, then `Opened`, against the stored version and build.
    private func trackLaunch() {
        let current = Lifecycle.Record(version: configuration.application.version, build: configuration.application.build)
        let file = directory.appendingPathComponent(StoredFile.appVersion.rawValue)
        for event in Lifecycle.launchEvents(previous: Lifecycle.load(file), current: current) {
            track(event.name, properties: event.properties)
        }
        Lifecycle.store(current, file)
    }

    /// The app left the foreground: `Application Backgrounded`, then a flush
    /// (each switchable). Called by the platform's notification; an app
    /// without UIKit or AppKit may call it itself.
    public func applicationDidEnterBackground() {
        if configuration.trackApplicationLifecycleEvents { track("Application Backgrounded") }
        if configuration.flushOnBackground { scheduleFlush() }
    }

    /// The app came back: `Application Opened` with `from_background: true`.
    public func applicationWillEnterForeground() {
        guard configuration.trackApplicationLifecycleEvents else { return }
        var properties = Lifecycle.properties(.init(version: configuration.application.version, build: configuration.application.build))
        properties["from_background"] = true
        track("Application Opened", properties: properties)
    }

    private func observeLifecycle() {
        guard configuration.trackApplicationLifecycleEvents || configuration.flushOnBackground,
              let names = Lifecycle.notifications
        else { return }
        let center = NotificationCenter.default
        let tokens = [
            ObserverToken(token: center.addObserver(forName: names.background, object: nil, queue: nil) { [weak self] _ in
                self?.applicationDidEnterBackground()
            }),
            ObserverToken(token: center.addObserver(forName: names.foreground, object: nil, queue: nil) { [weak self] _ in
                self?.applicationWillEnterForeground()
            }),
        ]
        observers.withLock { $0 = tokens }
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
        while isEnabled {
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
            case .refused(let reason) where items.count > 1:
                // One bad message must not cost the others: halve until the one refused is alone.
                configuration.log("server refused a batch of \(items.count) (\(reason)); sending it in smaller batches")
                batchSize = max(1, items.count / 2)
            case .refused(let reason):
                configuration.log("server refused message \(items[0].1.messageId) (\(reason)); dropping it")
                queue.remove(items.map(\.0))
                state.withLock { $0.rejected += 1 }
                batchSize = configuration.maxBatchSize
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
