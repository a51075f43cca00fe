import Foundation
import IngestServer
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Clients that trickle: a request head must arrive within the idle timeout,
/// a body within the body timeout, so a slow connection cannot hold a handler
/// (or a connection) for as long as it likes.
@Suite("slow clients")
struct SlowClientTests {
    @Test("a head trickled past the idle timeout is closed; a body trickled past the body timeout gets 408 and is not stored")
    func tricklersAreCutOff() async throws {
        try await withServer(configure: {
            $0.idleTimeout = .seconds(1)
            $0.bodyTimeout = .seconds(1)
        }) { h in
            let port = try #require(URL(string: h.url)?.port)
            // Headers that never end, a byte every 200 ms.
            let head = try #require(RawConnection(port: port))
            _ = head.send("POST /v1/batch HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            // Bounded by a generous limit only: what is checked is that the server closed it, not how fast.
            let started = ContinuousClock.now
            while head.send("a"), !head.closedByPeer(), ContinuousClock.now - started < .seconds(120) {
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(head.closedByPeer() || !head.send("a"), "the slow head was not cut off")

            // A whole head, then a body a byte at a time.
            let body = try #require(RawConnection(port: port))
            let basic = Data("\(h.key):".utf8).base64EncodedString()
            _ = body.send("POST /v1/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \(basic)\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{")
            // The server answers 408 and closes. Its close can reset the connection
            // before the answer is read (the trickled bytes are unread on its side),
            // so either outcome shows the body was cut off.
            let bodyStarted = ContinuousClock.now
            var answer = ""
            var closed = false
            while answer.isEmpty, !closed, ContinuousClock.now - bodyStarted < .seconds(120) {
                closed = !body.send(" ")
                answer = body.available()
                closed = closed || (answer.isEmpty && body.closedByPeer())
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(answer.hasPrefix("HTTP/1.1 408") || (answer.isEmpty && closed), "\(answer)")
            if !answer.isEmpty { #expect(answer.contains("body_timeout"), "\(answer)") }
            // The server still serves everyone else.
            #expect(try await h.post(json: Fixtures.batch([Fixtures.track("after-slow")])).status == 200)
        }
    }
}

/// A plain TCP connection to 127.0.0.1, for speaking HTTP by hand.
final class RawConnection {
    let handle: Int32

    init?(port: Int) {
        handle = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard handle >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(handle, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(handle); return nil }
    }

    deinit { close(handle) }

    func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { Glibc.send(handle, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    /// Whatever the peer has sent so far, without waiting.
    func available() -> String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let read = recv(handle, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        return read > 0 ? String(decoding: buffer.prefix(read), as: UTF8.self) : ""
    }

    func closedByPeer() -> Bool {
        var byte: UInt8 = 0
        let read = recv(handle, &byte, 1, Int32(MSG_DONTWAIT) | Int32(MSG_PEEK))
        return read == 0 || (read < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }
}
