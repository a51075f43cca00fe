import AsyncHTTPClient
import EventLog
import Foundation
import NIOHTTP1
import Hummingbird
import IngestServer
import LibPQ
import LocalPostgres
import Logging
import NIOCore
import ServiceLifecycle
import Testing

/// A real server on 127.0.0.1 (port 0) over a fresh migrated database, and a
/// real HTTP client. `withServer` tears all of it down, database included.
struct Harness: Sendable {
    let url: String
    let databaseURL: String
    let pool: ConnectionPool
    let key: String
    let client: HTTPClient

    struct Reply: Sendable {
        let status: Int
        let headers: [(String, String)]
        let body: String
        var json: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
        }
        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    }

    func send(
        _ method: HTTPMethod = .POST, _ path: String, body: [UInt8]? = nil, headers: [(String, String)] = [],
        timeout: TimeAmount = .seconds(120)
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: url + path)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await client.execute(request, timeout: timeout)
        let buffer = try await response.body.collect(upTo: 4 << 20)
        return Reply(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) }, body: String(buffer: buffer))
    }

    /// A JSON POST authenticated the way Segment's SDKs do (Basic, key as user name).
    /// The timeout is a guard against a hang, not a speed check: in a full
    /// suite on two cores a request held behind a test's lock has waited
    /// over two minutes.
    func post(
        _ path: String = "/v1/batch", json: String, key: String? = nil, extraHeaders: [(String, String)] = [],
        timeout: TimeAmount = .seconds(300)
    ) async throws -> Reply {
        let basic = Data(((key ?? self.key) + ":").utf8).base64EncodedString()
        return try await send(
            .POST, path, body: Array(json.utf8),
            headers: [("Content-Type", "application/json"), ("Authorization", "Basic \(basic)")] + extraHeaders, timeout: timeout)
    }

    /// The value of an unlabelled Prometheus sample from `/metrics`.
    func metric(_ name: String) async throws -> Double? {
        try await send(.GET, "/metrics").body.split(separator: "\n")
            .first { $0.hasPrefix(name + " ") }
            .flatMap { Double($0.dropFirst(name.count + 1)) }
    }

    func count(_ sql: String, _ parameters: [PostgresValue] = []) async throws -> Int {
        try await pool.query(sql, parameters).scalar(Int.self)
    }
}

/// Polls until `condition` holds. The deadline only keeps a broken test from
/// hanging; it asserts nothing about speed.
func waitUntil(_ what: String = #function, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(120)
    while try await !condition() {
        guard ContinuousClock.now < deadline else {
            struct Stuck: Error, CustomStringConvertible { let description: String }
            throw Stuck(description: "gave up waiting in \(what)")
        }
        try await Task.sleep(for: .milliseconds(50))
    }
}

enum Fixtures {
    static func iso(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    static func track(_ id: String, event: String = "otp_verified", anonymousId: String = "device-1", at date: Date = Date()) -> String {
        #"{"type":"track","event":"\#(event)","messageId":"\#(id)","anonymousId":"\#(anonymousId)","timestamp":"\#(iso(date))","properties":{"attempt":1}}"#
    }

    static func batch(_ messages: [String], sentAt: Date? = Date()) -> String {
        #"{"batch":[\#(messages.joined(separator: ","))]\#(sentAt.map { #","sentAt":"\#(iso($0))""# } ?? "")}"#
    }
}

let harnessLogger: Logger = {
    var logger = Logger(label: "onramp.test")
    logger.logLevel = .critical
    return logger
}()

/// Starts the application on a fresh database, runs `body`, shuts down gracefully, drops the database.
func withServer(
    databaseURL: String? = nil,
    configure: @Sendable (inout IngestConfiguration) -> Void = { _ in },
    _ body: @Sendable (Harness) async throws -> Void
) async throws {
    let db: TestDatabase? = databaseURL == nil ? try await TestDatabase.create() : nil
    let url = databaseURL ?? db?.url ?? ""
    let pool = ConnectionPool(url: url, maxConnections: 2)
    let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
    var configuration = IngestConfiguration(databaseURL: url)
    configuration.port = 0
    configuration.logger = harnessLogger
    configuration.migrationsDirectory = try TestDatabase.migrationsDirectory
    // The suite sends refused requests by the hundred; the pause has its own test.
    configuration.refusalPause = .zero
    // The idle timeout also ends a connection whose body the server has not
    // finished reading: one refused before its body is read (413 by its
    // Content-Length) waits unread while the handler runs, and when the
    // whole suite starved the server for 30 s the connection was closed
    // under the client before its answer (a reset, not a 413). The timeout
    // has its own test (SlowClientTests).
    configuration.idleTimeout = .seconds(600)
    configuration.onServerRunning = { port in
        portSink.yield(port)
        portSink.finish()
    }
    configure(&configuration)
    let app = try await buildApplication(configuration: configuration)
    let group = ServiceGroup(configuration: .init(services: [app], logger: harnessLogger))
    var clientConfiguration = HTTPClient.Configuration()
    // One connection per simulated client (the load test runs 200), so none waits for a pool slot.
    clientConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 256
    let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
    let outcome: Result<Void, any Error> = await withTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try? await group.run() }
        var port = 0
        for await p in ports { port = p }
        do {
            let key = try await WriteKeyStore(pool: pool).create(app: "yoked")
            try await body(Harness(url: "http://127.0.0.1:\(port)", databaseURL: url, pool: pool, key: key, client: client))
            await group.triggerGracefulShutdown()
            return .success(())
        } catch {
            await group.triggerGracefulShutdown()
            return .failure(error)
        }
    }
    try? await client.shutdown()
    await pool.close()
    try? await db?.drop()
    try outcome.get()
}
