import EventLog
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import IngestServer
import Logging
import NIOCore
import NIOConcurrencyHelpers
import Testing

/// Route behaviour without a database: the router over an in-memory key
/// lookup and event sink, driven by HummingbirdTesting. The same routes run
/// against PostgreSQL over real HTTP in the other suites.
@Suite struct RouteTests {
    struct Keys: WriteKeyLookup {
        var grants: [String: WriteKeyGrant] = ["ork_test": WriteKeyGrant(app: "yoked")]
        var failing = false
        func grant(forKey key: String) async throws -> WriteKeyGrant? {
            if failing { throw CommitUnavailable(reason: .databaseUnavailable, retryAfterSeconds: 1) }
            return grants[key]
        }
        func anyKeyAllows(origin: String) async throws -> Bool {
            if failing { throw CommitUnavailable(reason: .databaseUnavailable, retryAfterSeconds: 1) }
            return grants.values.contains { $0.allows(origin: origin) }
        }
    }

    /// Keeps what it is handed; every event new, or a refusal.
    final class Sink: EventSink {
        let received = NIOLockedValueBox<(events: [NewEvent], quarantine: [QuarantineEntry])>(([], []))
        let refusal: CommitUnavailable?
        init(refusal: CommitUnavailable? = nil) { self.refusal = refusal }
        func commit(_ events: [NewEvent], quarantine: [QuarantineEntry]) async throws -> [AppendOutcome] {
            if let refusal { throw refusal }
            received.withLockedValue { $0.events += events; $0.quarantine += quarantine }
            return events.map { _ in .stored }
        }
    }

    /// The routes over `keys` and `sink`; `.live` (real loopback HTTP) when a
    /// test needs the connection's peer address, as trusted proxies do.
    func withRoutes(
        keys: Keys = Keys(), sink: Sink = Sink(), forwarding: Forwarding = Forwarding(), accessLog: Logger? = nil,
        over framework: TestingSetup = .router, _ body: @Sendable (any TestClientProtocol) async throws -> Void
    ) async throws {
        var logger = Logger(label: "route-tests")
        logger.logLevel = .critical
        let ingest = IngestController(
            keys: keys, committer: sink, limiter: RateLimiter(rate: 1e6, burst: 1e6), metrics: IngestMetrics(),
            policy: IngestPolicy(), maxBodyBytes: 512 * 1024, bodyTimeout: .seconds(30), refusalPause: .zero, forwarding: forwarding, logger: logger)
        let router = buildRouter(
            ingest: ingest, health: nil, metrics: IngestMetrics(),
            accessLog: accessLog.map { AccessLogMiddleware(logger: $0, forwarding: forwarding) })
        let app = Application(router: router, logger: logger)
        try await app.test(framework, body)
    }

    static let auth: HTTPFields = [
        .authorization: "Basic " + Data("ork_test:".utf8).base64EncodedString(), .contentType: "application/json",
    ]

    static func errorCode(_ buffer: ByteBuffer) -> String? {
        let json = try? JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any]
        return (json?["error"] as? [String: Any])?["code"] as? String
    }

    @Test func aBatchReachesTheSinkAndIsAnswered200() async throws {
        let sink = Sink()
        try await withRoutes(sink: sink) { client in
            let body = #"{"batch":[{"type":"track","event":"otp_verified","anonymousId":"d","messageId":"m1"},{"type":"track","anonymousId":"d"}]}"#
            try await client.execute(uri: "/v1/batch", method: .post, headers: Self.auth, body: ByteBuffer(string: body)) { response in
                #expect(response.status == .ok)
                let json = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                #expect(json?["accepted"] as? Int == 1)
                #expect((json?["rejected"] as? [[String: Any]])?.first?["code"] as? String == "missing_event")
            }
        }
        let received = sink.received.withLockedValue { $0 }
        #expect(received.events.map(\.messageID) == ["m1"])
        #expect(received.events.first?.app == "yoked", "the app comes from the key")
        #expect(received.quarantine.map(\.rejection.index) == [1])
    }

    @Test func errorsAreThrownAndRenderedInOnePlace() async throws {
        try await withRoutes { client in
            let cases: [(String, HTTPRequest.Method, HTTPFields, String, HTTPResponse.Status, String)] = [
                ("/v1/batch", .post, [.contentType: "application/json"], #"{"batch":[]}"#, .unauthorized, "missing_write_key"),
                ("/v1/batch", .post, [.authorization: "Bearer ork_nope", .contentType: "application/json"], "{}", .unauthorized, "invalid_write_key"),
                ("/v1/batch", .post, Self.auth, "{nope", .badRequest, "invalid_json"),
                ("/v1/track", .post, Self.auth, "[1]", .badRequest, "invalid_body"),
                ("/v1/batch", .get, Self.auth, "", .methodNotAllowed, "method_not_allowed"),
                ("/v2/batch", .post, Self.auth, "{}", .notFound, "not_found"),
                ("/v1/projects/ork_nope/settings", .get, [:], "", .unauthorized, "invalid_write_key"),
            ]
            for (path, method, headers, body, status, code) in cases {
                try await client.execute(uri: path, method: method, headers: headers, body: ByteBuffer(string: body)) { response in
                    #expect(response.status == status, "\(method) \(path)")
                    #expect(Self.errorCode(response.body) == code, "\(method) \(path)")
                    #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
                }
            }
        }
    }

    @Test func unavailableKeysOrWriterAre503WithRetryAfter() async throws {
        let body = ByteBuffer(string: #"{"batch":[{"type":"track","event":"e","anonymousId":"d"}]}"#)
        try await withRoutes(keys: Keys(failing: true)) { client in
            try await client.execute(uri: "/v1/batch", method: .post, headers: Self.auth, body: body) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(Self.errorCode(response.body) == "database_unavailable")
                #expect(response.headers[.retryAfter] == "1")
            }
        }
        try await withRoutes(sink: Sink(refusal: CommitUnavailable(reason: .saturated, retryAfterSeconds: 2))) { client in
            try await client.execute(uri: "/v1/batch", method: .post, headers: Self.auth, body: body) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(Self.errorCode(response.body) == "writer_saturated")
                #expect(response.headers[.retryAfter] == "2")
            }
        }
    }
}
