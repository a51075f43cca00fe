import Foundation
import IngestServer
import LibPQ
import NIOCore
import Testing

/// A refused ingest request is answered no sooner than the refusal pause
/// after it arrived, so a client looping on refusals is held to one answer a
/// pause per connection; what is stored, and a 429 (which says when to come
/// back), are answered at once.
@Suite("refusal pause")
struct RefusalPauseTests {
    @Test("400, 401 and 413 are answered no sooner than the pause after they were sent, with their error bodies")
    func refusalsWaitOutThePause() async throws {
        let pause = Duration.seconds(2)
        try await withServer(configure: { $0.refusalPause = pause }) { h in
            let oversized = String(repeating: " ", count: 600 * 1024)
            let refused: [(String, @Sendable () async throws -> Harness.Reply, Int)] = [
                ("garbage", { try await h.post(json: "{not json") }, 400),
                ("unknown key", { try await h.post(json: Fixtures.batch([Fixtures.track("p-unknown")]), key: "wk_nobody") }, 401),
                ("oversized", { try await h.post(json: oversized) }, 413),
            ]
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (name, send, status) in refused {
                    group.addTask {
                        let started = ContinuousClock.now
                        let reply = try await send()
                        let waited = ContinuousClock.now - started
                        #expect(reply.status == status, "\(name): \(reply.body)")
                        #expect(reply.json?["error"] != nil, "\(name): the error body is still sent")
                        #expect(waited >= pause, "\(name) was answered after \(waited), before the pause")
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await h.pool.query("SELECT count(*) FROM events").scalar(Int.self) == 0)
        }
    }

    /// The pause is far longer than the client's timeout here: an answer
    /// held back by it would fail the request, not just be late. The timeout
    /// itself is minutes: in a full suite on two cores a request has taken
    /// over a minute to be answered.
    @Test("a stored batch and a 429 are not held back")
    func storedAndRateLimitedAreAnsweredAtOnce() async throws {
        try await withServer(configure: {
            $0.refusalPause = .seconds(600)
            $0.rateLimitPerSecond = 0.001
            $0.rateLimitBurst = 1
        }) { h in
            // The key's one token: stored, then the next is rate limited.
            let stored = try await h.post(json: Fixtures.batch([Fixtures.track("p-stored")]), timeout: .seconds(300))
            #expect(stored.status == 200, "\(stored.body)")
            let limited = try await h.post(json: Fixtures.batch([Fixtures.track("p-limited")]), timeout: .seconds(300))
            #expect(limited.status == 429, "\(limited.body)")
            #expect(limited.header("Retry-After") != nil)
            let ids = try await h.pool.query("SELECT message_id FROM events ORDER BY 1").rows.map { try $0.decode(String.self, at: 0) }
            #expect(ids == ["p-stored"])
        }
    }
}
