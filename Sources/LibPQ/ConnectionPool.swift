import NIOPosix
import NIOConcurrencyHelpers

/// A bounded pool of connections whose blocking libpq work runs on the pool's own
/// `NIOThreadPool` (one thread per connection), never on an event loop or on
/// Swift's cooperative threads.
///
/// A connection that broke while lent out, or whose backend died while it sat
/// idle, is closed and replaced by a new one on the next acquire.
public final class ConnectionPool: Sendable {
    public struct Configuration: Sendable {
        public var conninfo: String
        public var maxConnections: Int
        /// How long `withConnection` waits for a free connection before `poolTimeout`.
        public var acquireTimeout: Duration

        public init(conninfo: String, maxConnections: Int = 8, acquireTimeout: Duration = .seconds(10)) {
            self.conninfo = conninfo
            self.maxConnections = max(1, maxConnections)
            self.acquireTimeout = acquireTimeout
        }
    }

    /// Pool use, for metrics.
    public struct Usage: Sendable, Equatable {
        public var open: Int
        public var idle: Int
        public var waiting: Int
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Connection?, any Error>
    }

    private struct State {
        var idle: [Connection] = []
        var open = 0
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0
        var closed = false
    }

    private enum Step {
        case use(Connection)
        case create
        case wait
        case closed
    }

    public let configuration: Configuration
    // A pthread lock: ThreadSanitizer cannot see Synchronization.Mutex on Linux and reports false races.
    private let state = NIOLockedValueBox(State())
    private let threads: NIOThreadPool

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        threads = NIOThreadPool(numberOfThreads: configuration.maxConnections)
        threads.start()
    }

    public convenience init(url: String, maxConnections: Int = 8) {
        self.init(Configuration(conninfo: url, maxConnections: maxConnections))
    }

    deinit {
        threads.shutdownGracefully { _ in }
    }

    /// A pool on `url` for `body` alone: closed when `body` returns or throws
    /// (a command's few statements, a benchmark's setup).
    public static func using<T: Sendable>(
        url: String, maxConnections: Int = 1, _ body: (ConnectionPool) async throws -> T
    ) async throws -> T {
        let pool = ConnectionPool(url: url, maxConnections: maxConnections)
        let result: Result<T, any Error>
        do { result = .success(try await body(pool)) } catch { result = .failure(error) }
        await pool.close()
        return try result.get()
    }

    public var usage: Usage {
        state.withLockedValue { Usage(open: $0.open, idle: $0.idle.count, waiting: $0.waiters.count) }
    }

    /// Lends a connection to `body`, run on the pool's thread pool. A transaction
    /// `body` left open is rolled back before the connection is reused.
    public func withConnection<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        let connection = try await acquire()
        do {
            let value = try await threads.runIfActive {
                defer { Self.reset(connection) }
                return try body(connection)
            }
            release(connection)
            return value
        } catch {
            release(connection)
            throw error
        }
    }

    /// Convenience: one statement on a pooled connection.
    @discardableResult
    public func query(_ sql: String, _ parameters: [PostgresValue] = []) async throws -> QueryResult {
        try await withConnection { try $0.query(sql, parameters) }
    }

    /// Convenience: a transaction on a pooled connection.
    public func transaction<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await withConnection { try $0.transaction(body) }
    }

    /// Closes idle connections and refuses new work; lent connections close on return.
    public func close() async {
        let (idle, waiters) = state.withLockedValue { s -> ([Connection], [Waiter]) in
            s.closed = true
            defer {
                s.idle.removeAll()
                s.waiters.removeAll()
            }
            s.open -= s.idle.count
            return (s.idle, s.waiters)
        }
        for waiter in waiters { waiter.continuation.resume(throwing: PostgresError(.poolClosed, message: "pool closed")) }
        _ = idle  // released here: each handle's deinit calls PQfinish
        try? await threads.shutdownGracefully()
    }

    // MARK: Lending

    private func acquire() async throws -> Connection {
        while true {
            let step = state.withLockedValue { s -> Step in
                if s.closed { return .closed }
                if let connection = s.idle.popLast() { return .use(connection) }
                if s.open < configuration.maxConnections {
                    s.open += 1
                    return .create
                }
                return .wait
            }
            switch step {
            case .closed:
                throw PostgresError(.poolClosed, message: "pool closed")
            case .use(let connection):
                if connection.isAliveWhenIdle() { return connection }
                discard()  // its backend went away while idle; open a new one
            case .create:
                do {
                    let conninfo = configuration.conninfo
                    return try await threads.runIfActive { try Connection.connect(conninfo) }
                } catch {
                    discard()
                    throw error
                }
            case .wait:
                if let connection = try await waitForRelease() { return connection }
            }
        }
    }

    /// Suspends until a connection is handed over (or a slot frees up, `nil`), or the timeout.
    private func waitForRelease() async throws -> Connection? {
        let id = state.withLockedValue { s -> UInt64 in
            s.nextWaiterID += 1
            return s.nextWaiterID
        }
        let timeout = configuration.acquireTimeout
        let timer = Task { [weak self] in
            try await Task.sleep(for: timeout)
            self?.expire(waiter: id)
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let closed = state.withLockedValue { s -> Bool in
                if s.closed { return true }
                s.waiters.append(Waiter(id: id, continuation: continuation))
                return false
            }
            if closed { continuation.resume(throwing: PostgresError(.poolClosed, message: "pool closed")) }
        }
    }

    private func expire(waiter id: UInt64) {
        let expired = state.withLockedValue { s -> Waiter? in
            guard let index = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return s.waiters.remove(at: index)
        }
        expired?.continuation.resume(
            throwing: PostgresError(
                .poolTimeout,
                message: "no database connection free within \(configuration.acquireTimeout) (pool of \(configuration.maxConnections))"
            ))
    }

    private func release(_ connection: Connection) {
        if connection.isBroken {
            discard()
            return
        }
        let waiter = state.withLockedValue { s -> Waiter? in
            if s.closed {
                s.open -= 1
                return nil
            }
            if !s.waiters.isEmpty { return s.waiters.removeFirst() }
            s.idle.append(connection)
            return nil
        }
        waiter?.continuation.resume(returning: connection)
    }

    /// Forgets a connection (it closes when the last reference goes) and lets a
    /// waiter open a replacement.
    private func discard() {
        let waiter = state.withLockedValue { s -> Waiter? in
            s.open -= 1
            return s.waiters.isEmpty ? nil : s.waiters.removeFirst()
        }
        waiter?.continuation.resume(returning: nil)
    }

    private static func reset(_ connection: Connection) {
        if !connection.isBroken, connection.isInTransaction {
            try? connection.executeScript("ROLLBACK")
        }
    }
}
