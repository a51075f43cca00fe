import Foundation
import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOConcurrencyHelpers
#if canImport(Glibc)
import Glibc
#endif

/// Traffic that is not a well-behaved SDK, for the fault suite's hostile
/// scenarios (`scripts/faults`), run beside the well-behaved clients:
/// - `unknown-keys`: small valid batches, each under a made-up write key;
/// - `garbage`: bodies that are not JSON, over the size limit, or bad gzip;
/// - `slow`: connections that trickle their headers, or a body, a byte at a time.
/// Bounded in count (`concurrency`) and time (`duration`).
public struct HostileLoad: Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        case unknownKeys = "unknown-keys"
        case garbage
        case slow
    }

    public struct Summary: Sendable, Codable {
        public var kind: String
        public var seconds: Double
        public var requests: Int
        /// Answers by status (`"401"`), and `"connection"` for failed connections.
        public var statuses: [String: Int]
        /// Slow connections: opened, and closed by the server before the run ended.
        public var connectionsOpened: Int
        public var connectionsClosedByServer: Int
        /// Slow connections: the longest a connection stayed open.
        public var longestConnectionSeconds: Double
    }

    public var url: String
    public var kind: Kind
    public var concurrency: Int
    public var duration: Duration
    /// The key `garbage` sends with (a key of its own, so the well-behaved clients' rate limits are untouched).
    public var key: String?

    public init(url: String, kind: Kind, concurrency: Int, duration: Duration, key: String?) {
        self.url = url
        self.kind = kind
        self.concurrency = concurrency
        self.duration = duration
        self.key = key
    }

    private struct Tally: Sendable {
        var requests = 0
        var statuses: [String: Int] = [:]
        var opened = 0
        var closed = 0
        var longest: Duration = .zero
    }

    public func run() async throws -> Summary {
        let tally = NIOLockedValueBox(Tally())
        let started = ContinuousClock.now
        let deadline = started + duration
        switch kind {
        case .unknownKeys, .garbage:
            let client = LoadGenerator.makeClient(connections: concurrency)
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<concurrency {
                    group.addTask { await flood(worker: worker, client: client, deadline: deadline, tally: tally) }
                }
            }
            try? await client.shutdown()
        case .slow:
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<concurrency {
                    group.addTask { await trickle(worker: worker, deadline: deadline, tally: tally) }
                }
            }
        }
        let seconds = (ContinuousClock.now - started).seconds
        return tally.withLockedValue { t in
            Summary(
                kind: kind.rawValue, seconds: seconds, requests: t.requests, statuses: t.statuses, connectionsOpened: t.opened,
                connectionsClosedByServer: t.closed, longestConnectionSeconds: t.longest.seconds)
        }
    }

    private func flood(worker: Int, client: HTTPClient, deadline: ContinuousClock.Instant, tally: NIOLockedValueBox<Tally>) async {
        var round = 0
        let valid = Array(#"{"batch":[{"type":"track","event":"welcome_viewed","anonymousId":"hostile"}]}"#.utf8)
        // Made once: the attacker's own CPU should go to sending, not to its random numbers.
        let oversized = [UInt8](repeating: UInt8(ascii: " "), count: 700 * 1024)
        let garbage = (0..<8).map { _ in (0..<2_048).map { _ in UInt8.random(in: 0...255) } }
        let badGzip = (0..<8).map { _ in [0x1f, 0x8b, 0x08, 0x00] + (0..<1_024).map { _ in UInt8.random(in: 0...255) } }
        while ContinuousClock.now < deadline {
            round += 1
            var request = HTTPClientRequest(url: url + "/v1/batch")
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            switch kind {
            case .unknownKeys:
                let made = "ork_" + (0..<4).map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 16) }.joined()
                request.headers.add(name: "Authorization", value: "Basic " + Data((made + ":").utf8).base64EncodedString())
                request.body = .bytes(ByteBuffer(bytes: valid))
            case .garbage, .slow:
                if let key { request.headers.add(name: "Authorization", value: "Basic " + Data((key + ":").utf8).base64EncodedString()) }
                switch (worker + round) % 3 {
                case 0: request.body = .bytes(ByteBuffer(bytes: garbage[round % garbage.count]))
                case 1: request.body = .bytes(ByteBuffer(bytes: oversized))
                default:
                    request.headers.add(name: "Content-Encoding", value: "gzip")
                    request.body = .bytes(ByteBuffer(bytes: badGzip[round % badGzip.count]))
                }
            }
            let status: String
            do {
                let response = try await client.execute(request, timeout: .seconds(10))
                _ = try? await response.body.collect(upTo: 1 << 20)
                status = String(response.status.code)
            } catch {
                status = "connection"
            }
            tally.withLockedValue {
                $0.requests += 1
                $0.statuses[status, default: 0] += 1
            }
        }
    }

    /// One slow connection at a time per worker: even workers trickle headers
    /// that never end, odd ones send whole headers and then a body a byte at a
    /// time. When the server closes it, the worker opens another.
    private func trickle(worker: Int, deadline: ContinuousClock.Instant, tally: NIOLockedValueBox<Tally>) async {
        guard let port = URL(string: url)?.port else { return }
        while ContinuousClock.now < deadline {
            let socket = Self.connect(port: port)
            guard socket >= 0 else {
                tally.withLockedValue { $0.statuses["connection", default: 0] += 1 }
                try? await Task.sleep(for: .milliseconds(100))
                continue
            }
            let opened = ContinuousClock.now
            tally.withLockedValue { $0.opened += 1 }
            let head = worker % 2 == 0
                ? "POST /v1/batch HTTP/1.1\r\nHost: onramp\r\nX-Slow: "
                : "POST /v1/batch HTTP/1.1\r\nHost: onramp\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
            var closedByServer = !Self.send(socket, Array(head.utf8))
            while !closedByServer && ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(500))
                closedByServer = !Self.send(socket, [UInt8(ascii: "a")]) || Self.peerClosed(socket)
            }
            close(socket)
            let lasted = ContinuousClock.now - opened
            tally.withLockedValue { t in
                if closedByServer { t.closed += 1 }
                t.longest = max(t.longest, lasted)
            }
        }
    }

    private static func connect(port: Int) -> Int32 {
        let handle = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard handle >= 0 else { return -1 }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(handle, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if connected != 0 {
            close(handle)
            return -1
        }
        return handle
    }

    /// False once the peer has closed (EPIPE, ECONNRESET); never raises SIGPIPE.
    private static func send(_ socket: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    /// Whether the server has closed its side (a read returns end of file or an error).
    private static func peerClosed(_ socket: Int32) -> Bool {
        var byte: UInt8 = 0
        let read = recv(socket, &byte, 1, Int32(MSG_DONTWAIT))
        if read == 0 { return true }
        if read < 0 { return errno != EAGAIN && errno != EWOULDBLOCK }
        return read > 0  // it answered (a 408, say): it is done with this connection
    }
}

