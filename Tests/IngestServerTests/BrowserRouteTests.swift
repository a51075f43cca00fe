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

/// Browsers posting directly, proxies in front, and the access log: route
/// behaviour over the in-memory seams. Real Chromium and real nginx drive the
/// same routes in `BrowserTests` and `ProxyTests`.
extension RouteTests {
    static let page = "https://app.example.com"
    static let browserKeys = Keys(grants: [
        "ork_test": WriteKeyGrant(app: "yoked", allowedOrigins: [page]),
        "ork_server": WriteKeyGrant(app: "yoked"),
    ])
    static let event = #"{"type":"track","event":"otp_verified","anonymousId":"d","messageId":"m1","writeKey":"ork_test"}"#

    @Test("text/plain bodies are JSON; other non-JSON types still get 415")
    func textPlainIsJSON() async throws {
        let sink = Sink()
        try await withRoutes(sink: sink) { client in
            var headers = Self.auth
            headers[.contentType] = "text/plain;charset=UTF-8"
            try await client.execute(uri: "/v1/t", method: .post, headers: headers, body: ByteBuffer(string: Self.event)) { response in
                #expect(response.status == .ok)
            }
            headers[.contentType] = "application/x-www-form-urlencoded"
            try await client.execute(uri: "/v1/t", method: .post, headers: headers, body: ByteBuffer(string: Self.event)) { response in
                #expect(response.status == .unsupportedMediaType)
                #expect(Self.errorCode(response.body) == "unsupported_media_type")
            }
        }
        #expect(sink.received.withLockedValue { $0.events.map(\.messageID) } == ["m1"])
    }

    @Test("a preflight from an allowed origin gets the CORS headers; any other origin a 403 without them")
    func preflights() async throws {
        try await withRoutes(keys: Self.browserKeys) { client in
            let asked: HTTPFields = [
                .origin: Self.page, .accessControlRequestMethod: "POST", .accessControlRequestHeaders: "content-type,authorization",
            ]
            for path in ["/v1/batch", "/v1/t", "/v1/b", "/v1/track"] {
                try await client.execute(uri: path, method: .options, headers: asked) { response in
                    #expect(response.status == .noContent, "\(path)")
                    #expect(response.headers[.accessControlAllowOrigin] == Self.page)
                    #expect(response.headers[.accessControlAllowMethods] == "POST, OPTIONS")
                    #expect(response.headers[.accessControlAllowHeaders]?.contains("Authorization") == true)
                    #expect(response.headers[.accessControlMaxAge] != nil)
                    #expect(response.headers[.vary]?.contains("Origin") == true)
                }
            }
            // Same host, other scheme or port: another origin.
            for other in ["https://evil.example.com", "http://app.example.com", "https://app.example.com:8443", "null"] {
                var headers = asked
                headers[.origin] = other
                try await client.execute(uri: "/v1/batch", method: .options, headers: headers) { response in
                    #expect(response.status == .forbidden, "\(other)")
                    #expect(Self.errorCode(response.body) == "origin_not_allowed")
                    #expect(response.headers[.accessControlAllowOrigin] == nil)
                }
            }
            // The settings path names its key: the preflight is checked against that key alone.
            try await client.execute(uri: "/v1/projects/ork_test/settings", method: .options, headers: [.origin: Self.page]) { response in
                #expect(response.status == .noContent)
                #expect(response.headers[.accessControlAllowMethods] == "GET, OPTIONS")
            }
            try await client.execute(uri: "/v1/projects/ork_server/settings", method: .options, headers: [.origin: Self.page]) { response in
                #expect(response.status == .forbidden)
            }
            // No Origin: a plain OPTIONS, answered with Allow.
            try await client.execute(uri: "/v1/batch", method: .options) { response in
                #expect(response.status == .noContent)
                #expect(response.headers[.allow] == "POST, OPTIONS")
                #expect(response.headers[.accessControlAllowOrigin] == nil)
            }
        }
    }

    @Test("a post from an origin its key does not allow is 403 and nothing of it is stored; an allowed one carries the CORS headers, errors too")
    func postsAreCheckedAgainstTheirKey() async throws {
        let sink = Sink()
        try await withRoutes(keys: Self.browserKeys, sink: sink) { client in
            let plain: HTTPFields = [.contentType: "text/plain;charset=UTF-8"]
            // Key in the body (analytics.js), from an allowed page.
            var headers = plain
            headers[.origin] = Self.page
            try await client.execute(uri: "/v1/t", method: .post, headers: headers, body: ByteBuffer(string: Self.event)) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.accessControlAllowOrigin] == Self.page)
                #expect(response.headers[.vary] == "Origin")
            }
            // The same page, a malformed body: the error is readable by the page.
            try await client.execute(uri: "/v1/t", method: .post, headers: [.origin: Self.page, .authorization: "Bearer ork_test"], body: ByteBuffer(string: "{nope")) { response in
                #expect(response.status == .badRequest)
                #expect(response.headers[.accessControlAllowOrigin] == Self.page)
            }
            // Another page, key in the body or in the header: 403, not stored, no CORS headers.
            headers[.origin] = "https://evil.example.com"
            let other = Self.event.replacingOccurrences(of: "m1", with: "m2")
            try await client.execute(uri: "/v1/t", method: .post, headers: headers, body: ByteBuffer(string: other)) { response in
                #expect(response.status == .forbidden)
                #expect(Self.errorCode(response.body) == "origin_not_allowed")
                #expect(response.headers[.accessControlAllowOrigin] == nil)
            }
            headers[.authorization] = "Bearer ork_test"
            try await client.execute(uri: "/v1/t", method: .post, headers: headers, body: ByteBuffer(string: other)) { response in
                #expect(response.status == .forbidden)
            }
            // A server-only key refuses every page, even one another key allows.
            headers[.origin] = Self.page
            headers[.authorization] = "Bearer ork_server"
            try await client.execute(uri: "/v1/t", method: .post, headers: headers, body: ByteBuffer(string: other)) { response in
                #expect(response.status == .forbidden)
            }
            // A server (no Origin) uses any key as before.
            try await client.execute(uri: "/v1/t", method: .post, headers: [.authorization: "Bearer ork_server"], body: ByteBuffer(string: other)) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.accessControlAllowOrigin] == nil)
            }
        }
        #expect(sink.received.withLockedValue { $0.events.map(\.messageID) } == ["m1", "m2"])
    }

    static func segment(_ buffer: ByteBuffer) -> [String: Any]? {
        let json = try? JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any]
        return (json?["integrations"] as? [String: Any])?["Segment.io"] as? [String: Any]
    }

    @Test("the settings document advertises the public address: --public-url, else a trusted proxy's X-Forwarded-*, else Host")
    func settingsAdvertiseThePublicAddress() async throws {
        let forwarded: HTTPFields = [.xForwardedHost: "onramp.example.com", .xForwardedProto: "https"]
        let path = "/v1/projects/ork_test/settings"
        // A configured public URL wins over everything.
        let configured = Forwarding(publicURL: URL(string: "https://ingest.example.com/onramp/"), trustedProxies: [try IPNetwork("127.0.0.0/8")])
        try await withRoutes(forwarding: configured, over: .live) { client in
            try await client.execute(uri: path, method: .get, headers: forwarded) { response in
                #expect(Self.segment(response.body)?["apiHost"] as? String == "ingest.example.com/onramp/v1")
                #expect(Self.segment(response.body)?["protocol"] as? String == "https")
            }
        }
        // The peer (127.0.0.1) is a trusted proxy: its forwarded host and scheme.
        try await withRoutes(forwarding: Forwarding(trustedProxies: [try IPNetwork("127.0.0.1/32")]), over: .live) { client in
            try await client.execute(uri: path, method: .get, headers: forwarded) { response in
                #expect(Self.segment(response.body)?["apiHost"] as? String == "onramp.example.com/v1")
                #expect(Self.segment(response.body)?["protocol"] as? String == "https")
            }
        }
        // Not trusted: the headers are anyone's, so the Host header it is.
        try await withRoutes(forwarding: Forwarding(trustedProxies: [try IPNetwork("10.0.0.0/8")]), over: .live) { client in
            try await client.execute(uri: path, method: .get, headers: forwarded) { response in
                let host = Self.segment(response.body)?["apiHost"] as? String
                #expect(host?.hasPrefix("localhost") == true || host?.hasPrefix("127.0.0.1") == true, "\(host ?? "nil")")
                #expect(Self.segment(response.body)?["protocol"] as? String == "http")
            }
        }
    }

    @Test("trusted proxies: CIDR parsing and membership, IPv4, IPv6 and mapped")
    func networks() throws {
        let private10 = try IPNetwork("10.0.0.0/8")
        #expect(private10.contains(try #require(IPNetwork.bytes(parsing: "10.200.3.4"))))
        #expect(!private10.contains(try #require(IPNetwork.bytes(parsing: "11.0.0.1"))))
        #expect(private10.contains(try #require(IPNetwork.bytes(parsing: "::ffff:10.1.2.3"))))
        let loopback6 = try IPNetwork("::1")
        #expect(loopback6.contains(try #require(IPNetwork.bytes(parsing: "[::1]"))))
        #expect(!loopback6.contains(try #require(IPNetwork.bytes(parsing: "127.0.0.1"))))
        #expect(try IPNetwork("192.168.1.0/23").contains(try #require(IPNetwork.bytes(parsing: "192.168.0.77"))))
        for bad in ["", "10.0.0.0/33", "example.com", "10.0.0.0/x", "::1/129"] {
            #expect(throws: IngestConfigurationError.self, "\(bad)") { try IPNetwork(bad) }
        }
    }

    @Test("the access log has one line per request with the key's prefix and the counts, never the key or the body")
    func accessLog() async throws {
        let lines = LogCapture()
        var logger = Logger(label: "onramp.access") { _ in lines.handler() }
        logger.logLevel = .info
        let key = "ork_0123456789abcdef_secret"
        let keys = Keys(grants: [key: WriteKeyGrant(app: "yoked")])
        let forwarding = Forwarding(trustedProxies: [try IPNetwork("127.0.0.1")])
        try await withRoutes(keys: keys, forwarding: forwarding, accessLog: logger, over: .live) { client in
            let body = #"{"batch":[{"type":"track","event":"e","anonymousId":"d","messageId":"x1","properties":{"email":"a@b.c"}},{"type":"track","anonymousId":"d"}]}"#
            try await client.execute(
                uri: "/v1/batch?debug=1", method: .post,
                headers: [.authorization: "Bearer \(key)", .contentType: "application/json", .xForwardedFor: "203.0.113.9, 127.0.0.1"],
                body: ByteBuffer(string: body)
            ) { response in #expect(response.status == .ok) }
            try await client.execute(uri: "/v1/projects/\(key)/settings", method: .get) { response in #expect(response.status == .ok) }
            try await client.execute(uri: "/v1/nope", method: .post) { response in #expect(response.status == .notFound) }
        }
        let records = lines.records
        try #require(records.count == 3, "\(records)")
        let batch = records[0]
        #expect(batch.message == "request")
        #expect(batch.metadata["method"] == "POST")
        #expect(batch.metadata["path"] == "/v1/batch")
        #expect(batch.metadata["status"] == "200")
        #expect(batch.metadata["key"] == "ork_01234567")
        #expect(batch.metadata["accepted"] == "1")
        #expect(batch.metadata["duplicates"] == "0")
        #expect(batch.metadata["rejected"] == "1")
        #expect(batch.metadata["bytes"].flatMap(Int.init) ?? 0 > 100)
        #expect(batch.metadata["duration_ms"] != nil)
        #expect(batch.metadata["client"] == "203.0.113.9", "the nearest untrusted hop behind the trusted proxy")
        #expect(records[1].metadata["path"] == "/v1/projects/ork_01234567…/settings")
        #expect(records[2].metadata["status"] == "404")
        #expect(records[2].metadata["key"] == nil)
        let everything = records.map { "\($0.message) \($0.metadata)" }.joined()
        #expect(!everything.contains(key), "the key is never logged")
        #expect(!everything.contains("a@b.c"), "the body is never logged")
    }
}

/// Keeps what is logged through its handlers, for assertions.
final class LogCapture: Sendable {
    struct Record: Sendable {
        var message: String
        var metadata: [String: String]
    }

    struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let fields = (event.metadata ?? [:]).mapValues { "\($0)" }
            capture.box.withLockedValue { $0.append(Record(message: "\(event.message)", metadata: fields)) }
        }
    }

    fileprivate let box = NIOLockedValueBox<[Record]>([])
    var records: [Record] { box.withLockedValue { $0 } }
    func handler() -> Handler { Handler(capture: self) }
}
