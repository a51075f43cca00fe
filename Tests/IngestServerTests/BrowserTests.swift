import EventLog
import Foundation
import Hummingbird
import LibPQ
import NIOConcurrencyHelpers
import NIOHTTP1
import TestSupport
import Testing

/// A real browser posting directly: headless Chromium opens a page from one
/// loopback origin that sends to the server on another, the way a site using
/// analytics.js (or plain `fetch` and `sendBeacon`) does.
@Suite("browsers posting directly")
struct BrowserTests {
    /// The page: a text/plain `fetch` with the key in the body (what analytics.js
    /// sends, no preflight), a JSON batch with Basic auth (preflighted), and a
    /// beacon; it writes what the browser let it see into `#out`.
    static func page(server: String, key: String) -> String {
        """
        <!DOCTYPE html><html><head><meta charset="utf-8"><title>shop</title></head><body><pre id="out">pending</pre>
        <script>
        const server = "\(server)", key = "\(key)";
        const event = (id, name) => ({type: "track", event: name, anonymousId: "browser-1", messageId: id, writeKey: key});
        const outcome = async (promise) => {
          try { const r = await promise; return r.status + " " + JSON.stringify(await r.json()); }
          catch (e) { return "refused " + e.name; }
        };
        (async () => {
          const results = {};
          results.plain = await outcome(fetch(server + "/v1/t", {
            method: "POST", headers: {"Content-Type": "text/plain"}, body: JSON.stringify(event("b-plain", "welcome_viewed"))}));
          results.batch = await outcome(fetch(server + "/v1/b", {
            method: "POST", headers: {"Content-Type": "application/json", "Authorization": "Basic " + btoa(key + ":")},
            body: JSON.stringify({batch: [event("b-batch-1", "signup_started"), event("b-batch-2", "otp_sent")], sentAt: new Date().toISOString()})}));
          results.beacon = navigator.sendBeacon(server + "/v1/t",
            new Blob([JSON.stringify(event("b-beacon", "page_hidden"))], {type: "text/plain"}));
          document.getElementById("out").textContent = JSON.stringify(results);
        })();
        </script></body></html>
        """
    }

    /// Three page loads, each allowed its own 120 s (`Chromium.dumpDOM`): the
    /// test's limit must outlast them, or a slow suite on two cores fails it
    /// while every load is still within its own.
    @Test("a page from an allowed origin stores its fetch, batch and beacon once; from any other origin the browser is refused and nothing is stored",
          .timeLimit(.minutes(8)))
    func chromiumPostsAcrossOrigins() async throws {
        let browser = try #require(
            Chromium.executable(),
            "chromium is not installed: run `apt-get install chromium` (scripts/test installs it) — this test does not skip")
        try await withServer { h in
            let html = NIOLockedPage()
            try await withPageServer(html) { pagePort in
                let allowed = "http://127.0.0.1:\(pagePort)"
                let other = "http://localhost:\(pagePort)"  // same page, another origin
                let key = try await WriteKeyStore(pool: h.pool).create(app: "yoked", allowedOrigins: [allowed])
                html.set(Self.page(server: h.url, key: key))
                let profile = FileManager.default.temporaryDirectory.appendingPathComponent("onramp-browser-\(UUID().uuidString)")
                defer { try? FileManager.default.removeItem(at: profile) }

                // From the disallowed origin first: nothing may be stored.
                let refused = try await Self.load(browser, other, profile: profile)
                #expect(refused["plain"] as? String == "refused TypeError", "\(refused)")
                #expect(refused["batch"] as? String == "refused TypeError", "\(refused)")
                #expect(refused["beacon"] as? Bool == true, "the browser queues the beacon; the server must refuse it")
                try await Task.sleep(for: .seconds(2))  // let a beacon arrive, if it were to be stored
                #expect(try await h.count("SELECT count(*) FROM events") == 0)
                #expect(try await h.count("SELECT count(*) FROM quarantine") == 0)
                // The server saw and refused them: the batch's preflight, the plain post and the beacon.
                let metrics = try await h.send(.GET, "/metrics").body
                let forbidden = metrics.split(separator: "\n").first { $0.hasPrefix("onramp_http_requests_total{status=\"403\"}") }
                #expect(forbidden.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) } == 3, "\(forbidden ?? "no 403 counted")")

                // From the allowed origin, twice: the same messageIds are stored once.
                for round in 1...2 {
                    let seen = try await Self.load(browser, allowed, profile: profile)
                    let plain = try #require(seen["plain"] as? String, "\(seen)")
                    let batch = try #require(seen["batch"] as? String, "\(seen)")
                    #expect(plain.hasPrefix("200 "), "\(seen)")
                    #expect(batch.hasPrefix("200 "), "\(seen)")
                    #expect(plain.contains(round == 1 ? #""accepted":1"# : #""duplicates":1"#), "round \(round): \(plain)")
                    #expect(batch.contains(round == 1 ? #""accepted":2"# : #""duplicates":2"#), "round \(round): \(batch)")
                    #expect(seen["beacon"] as? Bool == true)
                    try await waitUntil("the beacon is stored") {
                        try await h.count("SELECT count(*) FROM events WHERE message_id = 'b-beacon'") == 1
                    }
                }
                let ids = try await h.pool.query("SELECT message_id FROM events ORDER BY message_id").rows.map { try $0.decode(String.self, at: 0) }
                #expect(ids == ["b-batch-1", "b-batch-2", "b-beacon", "b-plain"], "each stored exactly once")
                print("browser: refused from \(other): \(refused); stored from \(allowed): \(ids)")
            }
        }
    }

    /// Loads `origin`'s page and returns what it wrote into `#out`.
    static func load(_ browser: String, _ origin: String, profile: URL) async throws -> [String: Any] {
        let run = try await Chromium.dumpDOM(
            browser, try #require(URL(string: origin + "/")), profile: profile, extraFlags: ["--virtual-time-budget=15000"])
        #expect(run.status == 0, "chromium exited \(run.status): \(run.stderr.suffix(2000))")
        let dom = run.dom
        guard let start = dom.range(of: "<pre id=\"out\">"), let end = dom.range(of: "</pre>", range: start.upperBound..<dom.endIndex) else {
            Issue.record("no #out in the page: \(dom.prefix(2000))")
            return [:]
        }
        let text = String(dom[start.upperBound..<end.lowerBound]).replacingOccurrences(of: "&quot;", with: "\"")
            .replacingOccurrences(of: "&amp;", with: "&")
        let json = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
        if json == nil { Issue.record("the page did not finish: \(text); console: \(run.consoleLines)") }
        return json ?? [:]
    }
}

/// The page a page server answers with, set once the write key is known.
final class NIOLockedPage: Sendable {
    private let box = NIOLockedValueBox("")
    func set(_ html: String) { box.withLockedValue { $0 = html } }
    var html: String { box.withLockedValue { $0 } }
}

/// Serves `page` at `/` on a free loopback port while `body` runs.
func withPageServer(_ page: NIOLockedPage, _ body: @Sendable (Int) async throws -> Void) async throws {
    let router = Router()
    router.get("/") { _, _ in
        Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: .init(string: page.html)))
    }
    try await withLoopbackServer(router, body)
}
