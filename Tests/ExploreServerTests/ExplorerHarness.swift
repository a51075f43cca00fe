import AsyncHTTPClient
import ExploreServer
import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import TestSupport

/// A database with simulated journeys, and `onramp explore`'s application
/// over it as `onramp_analyst`, on a free loopback port.
struct ExplorerHarness: Sendable {
    static let token = "explore-test-token-0123456789"
    let db: TestDatabase
    let cache: URL
    let analystURL: String

    static func make(seed: UInt64 = 5) async throws -> ExplorerHarness {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let events = EventSeeder.journeys(configuration: try FunnelConfiguration.default(), personsPerFunnel: 200, seed: seed, detours: true)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        await pool.close()
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("explore-server-\(UUID().uuidString)")
        return ExplorerHarness(db: db, cache: cache, analystURL: try db.url(as: "onramp_analyst"))
    }

    func close() async throws {
        try? FileManager.default.removeItem(at: cache)
        try await db.drop()
    }

    /// Runs the explorer while `body` runs, given its base URL.
    func withExplorer(token: String? = ExplorerHarness.token, _ body: @Sendable (String) async throws -> Void) async throws {
        var configuration = ExploreConfiguration(databaseURL: analystURL, cacheRoot: cache)
        configuration.port = 0
        configuration.token = token
        configuration.timeoutSeconds = 120
        configuration.logger.logLevel = .warning
        try await withRunningServer(logger: configuration.logger, { onRunning in
            configuration.onServerRunning = onRunning
            return try buildExploreApplication(configuration: configuration)
        }) { port in try await body("http://127.0.0.1:\(port)") }
    }

    struct Reply: Sendable {
        let status: Int
        let headers: [(String, String)]
        let body: String
        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]) ?? [:] }
    }

    /// A client that shows redirects rather than following them (the token's sign-in answers one).
    static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    static func send(
        _ method: HTTPMethod, _ url: String, body: String? = nil, token: String? = ExplorerHarness.token, headers: [(String, String)] = []
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let body {
            request.body = .bytes(ByteBuffer(string: body))
            if !headers.contains(where: { $0.0 == "Content-Type" }) { request.headers.add(name: "Content-Type", value: "application/json") }
        }
        for (name, value) in headers { request.headers.replaceOrAdd(name: name, value: value) }
        let response = try await client.execute(request, timeout: .seconds(120))
        let buffer = try await response.body.collect(upTo: 8 << 20)
        return Reply(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) }, body: String(buffer: buffer))
    }

    /// Polls a query until it is no longer running; returns its last state.
    static func finished(_ base: String, id: String) async throws -> [String: Any] {
        for _ in 0..<1200 {
            let reply = try await send(.GET, "\(base)/api/queries/\(id)")
            if reply.json["state"] as? String != "running" { return reply.json }
            try await Task.sleep(for: .milliseconds(100))
        }
        return ["state": "still running after 120 s"]
    }
}
