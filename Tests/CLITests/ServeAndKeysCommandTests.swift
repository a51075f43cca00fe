import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// `onramp keys` and `onramp serve` as an operator runs them: the real binary.
@Suite("onramp keys and onramp serve")
struct ServeAndKeysCommandTests {
    /// Posts one batch with curl-like plain URLSession and returns the status.
    static func post(_ url: URL, key: String, ids: [String]) async throws -> Int {
        var request = URLRequest(url: url.appendingPathComponent("v1/batch"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Basic " + Data("\(key):".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        let messages = ids.map { #"{"type":"track","event":"otp_verified","messageId":"\#($0)","anonymousId":"dev"}"# }
        request.httpBody = Data(#"{"batch":[\#(messages.joined(separator: ","))]}"#.utf8)
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    @Test("keys create prints only the key; only a hash is stored; list shows it; revoke makes the server refuse it")
    func keysLifecycle() async throws {
        let db = try await TestDatabase.create()
        let created = try OnrampBinary.run(["keys", "create", "--app", "yoked", "--database-url", db.url])
        #expect(created.status == 0, "\(created.stderr)")
        let key = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!key.isEmpty && !key.contains("\n") && !key.contains(" "))
        let pool = db.pool(maxConnections: 1)
        let stored = try await pool.query("SELECT encode(key_hash, 'hex') || key_prefix || app FROM write_keys").scalar(String.self)
        #expect(!stored.contains(key))  // the key itself is nowhere in the table
        let list = try OnrampBinary.run(["keys", "list", "--database-url", db.url])
        #expect(list.stdout.contains("yoked"))
        #expect(!list.stdout.contains(key))

        let serve = try await ServeProcess.start(["--database-url", db.url, "--key-cache-seconds", "0.5"])
        defer { serve.stop() }
        let server = serve.process, base = serve.base
        var status = 0
        // Up to a minute: a server starting beside the whole suite can be slow to answer.
        for _ in 0..<600 where status != 200 {
            status = (try? await Self.post(base, key: key, ids: ["k1"])) ?? 0
            if status != 200 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(status == 200)
        let revoked = try OnrampBinary.run(["keys", "revoke", String(key.prefix(12)), "--database-url", db.url])
        #expect(revoked.status == 0, "\(revoked.stderr)")
        try await Task.sleep(for: .seconds(1))  // the server caches key lookups for 0.5 s
        #expect(try await Self.post(base, key: key, ids: ["k2"]) == 401)
        server.terminate()
        server.waitUntilExit()
        #expect(server.terminationStatus == 0)
        await pool.close()
        try await db.drop()
    }

    @Test("keys create --allow-origin and keys allow-origin store origins as browsers send them; a bad origin is refused naming the option")
    func keyOrigins() async throws {
        let db = try await TestDatabase.create()
        let created = try OnrampBinary.run([
            "keys", "create", "--app", "forma", "--allow-origin", "HTTPS://App.Example.com:443", "--allow-origin", "http://localhost:3000",
            "--database-url", db.url,
        ])
        #expect(created.status == 0, "\(created.stderr)")
        let key = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let server = try OnrampBinary.run(["keys", "create", "--app", "forma", "--database-url", db.url])
        #expect(server.status == 0)
        var list = try OnrampBinary.run(["keys", "list", "--database-url", db.url])
        #expect(list.stdout.contains("forma\t") && list.stdout.contains("https://app.example.com,http://localhost:3000"), "\(list.stdout)")
        #expect(list.stdout.split(separator: "\n").last?.hasSuffix("\t-") == true, "the second key is server-only")

        let allowed = try OnrampBinary.run(["keys", "allow-origin", "2", "https://shop.example.com/", "--database-url", db.url])
        #expect(allowed.status == 0, "\(allowed.stderr)")
        let again = try OnrampBinary.run(["keys", "allow-origin", "2", "https://shop.example.com", "--database-url", db.url])
        #expect(again.status == 0, "allowing twice is harmless")
        let removed = try OnrampBinary.run(["keys", "disallow-origin", String(key.prefix(12)), "http://localhost:3000", "--database-url", db.url])
        #expect(removed.status == 0, "\(removed.stderr)")
        list = try OnrampBinary.run(["keys", "list", "--database-url", db.url])
        let rows = list.stdout.split(separator: "\n").dropFirst().map { $0.split(separator: "\t").last.map(String.init) }
        #expect(rows == ["https://app.example.com", "https://shop.example.com"], "\(list.stdout)")

        for (arguments, expected) in [
            (["keys", "create", "--app", "forma", "--allow-origin", "ftp://files.example.com"], "--allow-origin: 'ftp://files.example.com' is not a web origin"),
            (["keys", "create", "--app", "forma", "--allow-origin", "https://example.com/page"], "has more than an origin"),
            (["keys", "allow-origin", "99", "https://example.com"], "no live key matches '99'"),
        ] {
            let refused = try OnrampBinary.run(arguments + ["--database-url", db.url])
            #expect(refused.status != 0, "\(arguments)")
            #expect(refused.stderr.contains(expected), "\(arguments): \(refused.stderr)")
        }
        try await db.drop()
    }

    @Test("serve refuses more writers than its pool can spare, naming the flag, before it touches the database")
    func writersMustLeaveAConnection() throws {
        let refused = try OnrampBinary.run(
            ["serve", "--pool-size", "4", "--writers", "4", "--database-url", "postgresql://nobody@127.0.0.1:1/none"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("--writers must be 1…3"))
    }

    @Test("serve keeps /metrics off the API's port, on a listener of its own; off turns it off")
    func metricsListenApart() async throws {
        let db = try await TestDatabase.create()
        let key = try OnrampBinary.run(["keys", "create", "--app", "ops", "--database-url", db.url]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let serve = try await ServeProcess.start(["--database-url", db.url])
        defer { serve.stop() }
        var request = URLRequest(url: serve.base.appendingPathComponent("v1/batch"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Basic " + Data("\(key):".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        request.httpBody = Data(#"{"batch":[{"type":"track","event":"opened","messageId":"m1","anonymousId":"d1"}]}"#.utf8)
        var answered = 0
        for _ in 0..<100 where answered != 200 {
            answered = ((try? await URLSession.shared.data(for: request))?.1 as? HTTPURLResponse)?.statusCode ?? 0
            if answered != 200 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(answered == 200)
        let onAPI = try await URLSession.shared.data(from: serve.base.appendingPathComponent("metrics"))
        #expect((onAPI.1 as? HTTPURLResponse)?.statusCode == 404, "the API's port serves no metrics")
        let metricsURL = try #require(serve.metricsURL)
        let scraped = try await URLSession.shared.data(from: metricsURL)
        #expect((scraped.1 as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: scraped.0, as: UTF8.self).contains(#"onramp_messages_total{app="ops",outcome="accepted"} 1"#))

        let off = try await ServeProcess.start(["--database-url", db.url, "--metrics-listen", "off"])
        defer { off.stop() }
        #expect(off.metricsPort == nil)
        let bad = try OnrampBinary.run(["serve", "--metrics-listen", "9474", "--database-url", "postgresql://nobody@127.0.0.1:1/none"])
        #expect(bad.status != 0 && bad.stderr.contains("--metrics-listen must be HOST:PORT, such as 127.0.0.1:9474, or off (got '9474')"), "\(bad.stderr)")
        try await db.drop()
    }

    @Test("serve refuses a bad --public-url or --trusted-proxy, naming the flag and the form expected")
    func proxyFlagsAreChecked() throws {
        for (arguments, expected) in [
            (["--public-url", "onramp.example.com"], "--public-url 'onramp.example.com': expected http(s)://host[:port][/path]"),
            (["--trusted-proxy", "10.0.0.0/40"], "--trusted-proxy '10.0.0.0/40': the prefix length must be 0…32"),
            (["--trusted-proxy", "proxy.internal"], "--trusted-proxy 'proxy.internal': expected an IP address or a CIDR network"),
        ] {
            let refused = try OnrampBinary.run(["serve"] + arguments + ["--database-url", "postgresql://nobody@127.0.0.1:1/none"])
            #expect(refused.status != 0, "\(arguments)")
            #expect(refused.stderr.contains(expected), "\(arguments): \(refused.stderr)")
        }
    }

    @Test("SIGTERM mid-load: every acknowledged message is stored, and the server exits 0")
    func sigtermIsGraceful() async throws {
        let db = try await TestDatabase.create()
        let key = try OnrampBinary.run(["keys", "create", "--app", "ops", "--database-url", db.url]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let serve = try await ServeProcess.start(["--database-url", db.url, "--key-cache-seconds", "0.5"])
        defer { serve.stop() }
        let server = serve.process, base = serve.base
        for _ in 0..<600 {
            if (try? await Self.post(base, key: key, ids: ["warm"])) == 200 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        // 16 clients post batches of 20 until the server goes away; each keeps what was acknowledged.
        let acknowledged = try await withThrowingTaskGroup(of: [String].self) { group in
            for client in 0..<16 {
                group.addTask {
                    var acked: [String] = []
                    for batch in 0..<10_000 {
                        let ids = (0..<20).map { "c\(client)-b\(batch)-m\($0)" }
                        guard let status = try? await Self.post(base, key: key, ids: ids) else { break }
                        if status == 200 { acked += ids } else if status != 503 { break }
                    }
                    return acked
                }
            }
            try await Task.sleep(for: .milliseconds(1500))
            kill(server.processIdentifier, SIGTERM)
            var all: [String] = []
            for try await ids in group { all += ids }
            return all
        }
        server.waitUntilExit()
        #expect(server.terminationReason == .exit && server.terminationStatus == 0)
        #expect(acknowledged.count > 100)
        let pool = db.pool(maxConnections: 1)
        let stored = Set(try await pool.query("SELECT message_id FROM events WHERE message_id <> 'warm'").rows.map { try $0.decode(String.self, at: 0) })
        let lost = Set(acknowledged).subtracting(stored)
        #expect(lost.isEmpty, "\(lost.count) acknowledged messages were lost")
        #expect(try await pool.query("SELECT count(*) - count(DISTINCT message_id) FROM events").scalar(Int.self) == 0)
        await pool.close()
        try await db.drop()
    }
}
