import Foundation
import LibPQ
import LocalPostgres
import NIOHTTP1
import TestSupport
import Testing

/// `onramp explore`'s API over real HTTP and a real PostgreSQL, as
/// `onramp_analyst`: the token, the page's headers, refusals that name the
/// field, and a query cancelled while the server runs its statement.
@Suite("onramp explore's API")
struct ExploreAPITests {
    static let funnel = #"{"definition": {"app": "yoked", "window": "1h", "steps": [{"event": "onboarding_started"}, {"event": "phone_entered"}, {"event": "otp_verified"}]}}"#

    @Test("every API call needs the token; ?token= sets an HttpOnly, SameSite=Strict cookie; the page is self-contained")
    func token() async throws {
        let harness = try await ExplorerHarness.make()
        try await harness.withExplorer { base in
            #expect(try await ExplorerHarness.send(.GET, "\(base)/api/apps", token: nil).status == 401)
            #expect(try await ExplorerHarness.send(.GET, "\(base)/api/apps", token: "wrong-token-0123456789").status == 401)
            let apps = try await ExplorerHarness.send(.GET, "\(base)/api/apps")
            #expect(apps.status == 200)
            #expect((apps.json["apps"] as? [String])?.contains("yoked") == true, "\(apps.body)")
            #expect(try await ExplorerHarness.send(.GET, "\(base)/?token=wrong-token-0123456789", token: nil).status == 401)
            let signIn = try await ExplorerHarness.send(.GET, "\(base)/?token=\(ExplorerHarness.token)", token: nil)
            #expect(signIn.status == 303)
            let cookie = signIn.header("set-cookie") ?? ""
            #expect(cookie.contains("onramp_explore=\(ExplorerHarness.token)") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "\(cookie)")
            let page = try await ExplorerHarness.send(.GET, base + "/", token: nil)
            #expect(page.status == 200)
            let policy = page.header("content-security-policy") ?? ""
            #expect(policy.contains("default-src 'none'") && policy.contains("script-src 'sha256-") && !policy.contains("script-src 'unsafe-inline'"), "\(policy)")
            // Nothing fetched from elsewhere: no URL of another origin in any src, href or fetch.
            #expect(!page.body.contains("src=\"http") && !page.body.contains("href=\"http") && !page.body.contains("fetch(\"http"))
        }
        try await harness.close()
    }

    @Test("/metrics needs the token; it counts the queries by how they ended, those running, and the stores' bytes")
    func metrics() async throws {
        let harness = try await ExplorerHarness.make()
        try await harness.withExplorer { base in
            #expect(try await ExplorerHarness.send(.GET, "\(base)/metrics", token: nil).status == 401)
            let started = try await ExplorerHarness.send(.POST, "\(base)/api/queries", body: Self.funnel, headers: [("Content-Type", "application/json")])
            let id = try #require(started.json["id"] as? String, "\(started.body)")
            _ = try await ExplorerHarness.finished(base, id: id)
            let scraped = try await ExplorerHarness.send(.GET, "\(base)/metrics")
            #expect(scraped.status == 200)
            let lines = scraped.body.split(separator: "\n").map(String.init)
            func value(_ series: String) -> Double? { lines.first { $0.hasPrefix(series + " ") }.flatMap { Double($0.dropFirst(series.count + 1)) } }
            #expect(value(#"onramp_explore_queries_total{outcome="done"}"#) == 1, "\(scraped.body)")
            #expect(value("onramp_explore_queries_running") == 0)
            #expect(value("onramp_explore_query_duration_seconds_count") == 1)
            #expect((value("onramp_explore_store_bytes") ?? 0) > 1000, "the app's columns are on disk")
        }
        try await harness.close()
    }

    @Test("without a token, on loopback: only loopback host names and JSON bodies are served (no rebinding, no cross-site form)")
    func loopbackOnly() async throws {
        let harness = try await ExplorerHarness.make()
        try await harness.withExplorer(token: nil) { base in
            #expect(try await ExplorerHarness.send(.GET, "\(base)/api/apps", token: nil).status == 200)
            let port = base.split(separator: ":").last.map(String.init) ?? ""
            for host in ["localhost:\(port)", "127.0.0.1"] {
                #expect(try await ExplorerHarness.send(.GET, "\(base)/api/apps", token: nil, headers: [("Host", host)]).status == 200, "\(host)")
            }
            let rebound = try await ExplorerHarness.send(.GET, "\(base)/api/apps", token: nil, headers: [("Host", "attacker.example:\(port)")])
            #expect(rebound.status == 403, "\(rebound.body)")
            let form = try await ExplorerHarness.send(
                .POST, "\(base)/api/queries", body: Self.funnel, token: nil, headers: [("Content-Type", "text/plain")])
            #expect(form.status == 415, "\(form.body)")
        }
        try await harness.close()
    }

    @Test("bad queries are refused naming the field; an unknown app fails with its name")
    func refusals() async throws {
        let harness = try await ExplorerHarness.make()
        try await harness.withExplorer { base in
            for (body, message) in [
                ("not json", "the body must be a JSON object"),
                (#"{"definition": {"app": "yoked", "steps": [{"event": "a", "where": {"plan": "pro"}}, {"event": "b"}]}}"#,
                 "steps[0].where: 'plan' is not a path under properties., context. or traits."),
                (#"{"definition": {"app": "yoked", "window": "soon", "steps": [{"event": "a"}, {"event": "b"}]}}"#, "window: cannot parse 'soon'"),
                (#"{"definition": {"app": "yoked", "steps": [{"event": "a"}]}}"#, "a funnel needs at least two steps"),
                (#"{"definition": {"app": "yoked", "steps": [{"event": "a"}, {"event": "b"}]}, "from": "2026-1-5"}"#, "from: expected a day as YYYY-MM-DD"),
            ] {
                let reply = try await ExplorerHarness.send(.POST, "\(base)/api/queries", body: body)
                #expect(reply.status == 400, "\(body): \(reply.body)")
                #expect((reply.json["error"] as? String)?.contains(message) == true, "\(body): \(reply.body)")
            }
            let unknown = try await ExplorerHarness.send(
                .POST, "\(base)/api/queries", body: #"{"definition": {"app": "nope", "steps": [{"event": "a"}, {"event": "b"}]}}"#)
            let id = try #require(unknown.json["id"] as? String, "\(unknown.body)")
            let state = try await ExplorerHarness.finished(base, id: id)
            #expect(state["state"] as? String == "failed" && (state["error"] as? String)?.contains("unknown app 'nope'") == true, "\(state)")
            #expect(try await ExplorerHarness.send(.GET, "\(base)/api/catalog?app=nope").status == 404)
            #expect(try await ExplorerHarness.send(.GET, "\(base)/api/queries/no-such-id").status == 404)
        }
        try await harness.close()
    }

    @Test("a query waiting on the server is cancelled from the API: its statement stops, and it says cancelled")
    func cancelWhileReading() async throws {
        let harness = try await ExplorerHarness.make()
        try await harness.withExplorer { base in
            // Another session holds the log: the query's read waits in PostgreSQL.
            let blocker = try Connection.connect(harness.db.url)
            try blocker.executeScript("BEGIN; LOCK TABLE events IN ACCESS EXCLUSIVE MODE;")
            let started = try await ExplorerHarness.send(.POST, "\(base)/api/queries", body: Self.funnel)
            let id = try #require(started.json["id"] as? String, "\(started.body)")
            try await Task.sleep(for: .seconds(1))
            let running = try await ExplorerHarness.send(.GET, "\(base)/api/queries/\(id)").json
            #expect(running["state"] as? String == "running", "\(running)")
            let cancelled = try await ExplorerHarness.send(.DELETE, "\(base)/api/queries/\(id)")
            #expect(cancelled.status == 200)
            let clock = ContinuousClock.now
            let state = try await ExplorerHarness.finished(base, id: id)
            #expect(state["state"] as? String == "cancelled", "\(state)")
            // The lock is held until after this: "cancelled" at all means the
            // statement stopped. The bound, under `finished`'s own 120 s, only
            // catches a hang (on two cores in a full suite it has taken 28 s).
            #expect(ContinuousClock.now - clock < .seconds(90), "the statement stopped, not the lock released")
            try blocker.executeScript("ROLLBACK")
            // The store is whole afterwards: the same query answers.
            let again = try await ExplorerHarness.send(.POST, "\(base)/api/queries", body: Self.funnel)
            let answer = try await ExplorerHarness.finished(base, id: try #require(again.json["id"] as? String))
            #expect(answer["state"] as? String == "done", "\(answer)")
        }
        try await harness.close()
    }
}
