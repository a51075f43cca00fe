import Foundation
import Funnels
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// `onramp privacy` as an operator runs it, beside two `onramp serve` writing as `onramp_writer`.
@Suite("onramp privacy and onramp serve")
struct PrivacyCommandTests {
    /// A running `onramp serve`, with the requests these tests make of it.
    final class Server {
        let serve: ServeProcess
        var base: URL { serve.base }

        init(databaseURL: String) async throws {
            serve = try await ServeProcess.start(["--database-url", databaseURL])
        }

        func stop() { serve.stop() }

        /// Posts one message of `user` on `device`; the status and the answer's counts.
        func post(key: String, messageId: String, user: String?, device: String) async throws -> (status: Int, body: [String: Any]) {
            var request = URLRequest(url: base.appendingPathComponent("v1/batch"))
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.setValue("Basic " + Data("\(key):".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
            let userField = user.map { #","userId":"\#($0)""# } ?? ""
            request.httpBody = Data(
                #"{"batch":[{"type":"track","event":"otp_verified","messageId":"\#(messageId)","anonymousId":"\#(device)"\#(userField)}]}"#.utf8)
            let (data, response) = try await URLSession.shared.data(for: request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:])
        }

        /// Waits until the server stores a message with `key`: up to a minute, as one beside the whole suite can take.
        func ready(key: String) async throws {
            for attempt in 0..<600 {
                if let (status, _) = try? await post(key: key, messageId: "ready-\(attempt)-\(UUID().uuidString)", user: nil, device: "probe"), status == 200 { return }
                try await Task.sleep(for: .milliseconds(100))
            }
            throw ServeProcess.Failure(description: "onramp serve on \(base) did not answer 200 within a minute:\n\(serve.output)")
        }

        func metrics() async throws -> String {
            guard let url = serve.metricsURL else { throw ServeProcess.Failure(description: "no metrics listener") }
            return String(decoding: try await URLSession.shared.data(from: url).0, as: UTF8.self)
        }
    }

    @Test("after privacy erase --suppress, two servers and a restarted one answer the person's messages 200 and store none; list shows no id")
    func suppressAcrossServers() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let key = try OnrampBinary.run(["keys", "create", "--app", "yoked", "--database-url", db.url]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let writer = try db.url(as: "onramp_writer")
        var first = try await Server(databaseURL: writer)
        let second = try await Server(databaseURL: writer)
        try await first.ready(key: key)
        try await second.ready(key: key)
        // The server's own role is enough for it to say it is ready.
        let readiness = try await URLSession.shared.data(from: first.base.appendingPathComponent("readyz"))
        #expect((readiness.1 as? HTTPURLResponse)?.statusCode == 200, "\(String(decoding: readiness.0, as: UTF8.self))")
        #expect(try await first.post(key: key, messageId: "p1", user: nil, device: "cli-device").status == 200)
        #expect(try await first.post(key: key, messageId: "p2", user: "cli-user", device: "cli-device").status == 200)

        let erase = try OnrampBinary.run([
            "privacy", "erase", "--app", "yoked", "--user-id", "cli-user", "--suppress", "--requested-by", "ticket-7", "--database-url", db.url,
        ])
        #expect(erase.status == 0, "\(erase.stderr)")
        #expect(erase.stdout.contains("erased 1 user(s) and 1 device(s)"), "\(erase.stdout)")
        #expect(try await pool.query("SELECT count(*) FROM events WHERE anonymous_id = 'cli-device' OR user_id = 'cli-user'").scalar(Int.self) == 0)

        let viaSecond = try await second.post(key: key, messageId: "p3", user: "cli-user", device: "a-new-device")
        #expect(viaSecond.status == 200)
        #expect(viaSecond.body["suppressed"] as? Int == 1)
        #expect(viaSecond.body["accepted"] as? Int == 0)
        let resent = try await second.post(key: key, messageId: "p1", user: nil, device: "another-device")
        #expect(resent.body["duplicates"] as? Int == 1)
        first.stop()
        first = try await Server(databaseURL: writer)
        try await first.ready(key: key)
        let afterRestart = try await first.post(key: key, messageId: "p4", user: nil, device: "cli-device")
        #expect(afterRestart.status == 200)
        #expect(afterRestart.body["suppressed"] as? Int == 1)
        #expect(try await first.post(key: key, messageId: "p5", user: "someone-else", device: "their-device").body["accepted"] as? Int == 1)
        #expect(try await pool.query("SELECT count(*) FROM events WHERE anonymous_id = 'cli-device' OR user_id = 'cli-user'").scalar(Int.self) == 0)
        #expect(try await second.metrics().contains(#"onramp_messages_total{app="yoked",outcome="suppressed"} 1"#))

        let list = try OnrampBinary.run(["privacy", "list", "--database-url", db.url])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains("ticket-7"))
        #expect(!list.stdout.contains("cli-user") && !list.stdout.contains("cli-device"))
        let refused = try OnrampBinary.run(["privacy", "erase", "--app", "yoked", "--requested-by", "x", "--database-url", db.url])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("--user-id"))
        first.stop()
        second.stop()
        await pool.close()
        try await db.drop()
    }

    /// Every file under `directory` that holds `text`.
    static func files(under directory: String, holding text: String) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: directory)
        var found: [String] = []
        while let path = enumerator?.nextObject() as? String {
            let full = directory + "/" + path
            if let data = FileManager.default.contents(atPath: full), data.range(of: Data(text.utf8)) != nil { found.append(path) }
        }
        return found
    }

    @Test("after an erasure, onramp funnel's copy of the log starts again: the person is gone from its answer and its files")
    func explorerForgets() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let events = EventSeeder.journeys(configuration: try FunnelConfiguration.default(), personsPerFunnel: 60, seed: 5)
            .filter { $0.app == "yoked" }
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        // A user whose id no other id starts with, so a search of the files finds it alone.
        let ids = Set(events.flatMap { [$0.userId, $0.anonymousId].compactMap { $0 } })
        let signedIn = try #require(events.first { event in
            guard let user = event.userId, event.event != nil else { return false }
            return !ids.contains { $0 != user && $0.hasPrefix(user) }
        })
        let user = try #require(signedIn.userId), step = try #require(signedIn.event)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("privacy-explore-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let ask = ["funnel", "--database-url", db.url, "--app", "yoked", "--step", step, "--step", "onboarding_completed", "--format", "json", "--cache", cache, "--quiet"]
        func reached() throws -> Int {
            let run = try OnrampBinary.run(ask)
            #expect(run.status == 0, "\(run.stderr)")
            let json = try FunnelCommandJSON.object(run.stdout)
            return try #require((json["steps"] as? [[String: Any]])?.first?["persons"] as? Int)
        }
        let before = try reached()
        #expect(!Self.files(under: cache, holding: user).isEmpty)
        let erase = try OnrampBinary.run(["privacy", "erase", "--app", "yoked", "--user-id", user, "--requested-by", "t", "--database-url", db.url])
        #expect(erase.status == 0, "\(erase.stderr)")
        #expect(try reached() == before - 1)
        #expect(Self.files(under: cache, holding: user).isEmpty)
        await pool.close()
        try await db.drop()
    }
}

/// The JSON object in a command's output.
enum FunnelCommandJSON {
    static func object(_ text: String) throws -> [String: Any] {
        let start = try #require(text.firstIndex(of: "{"))
        return try #require(try JSONSerialization.jsonObject(with: Data(text[start...].utf8)) as? [String: Any])
    }
}
