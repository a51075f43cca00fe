import AsyncHTTPClient
import CompressNIO
import EventLog
import Foundation
import Funnels
import IngestServer
import NIOHTTP1
import LibPQ
import LocalPostgres
import NIOCore
import Testing

@Suite struct StatusCodeTests {
    @Test func everyStatusCode() async throws {
        try await withServer(configure: { $0.rateLimitPerSecond = 0.001; $0.rateLimitBurst = 4 }) { h in
            let ok = try await h.post(json: Fixtures.batch([Fixtures.track("s1")]))
            #expect(ok.status == 200)
            #expect(ok.json?["accepted"] as? Int == 1)

            let badJSON = try await h.post(json: "{nope")
            #expect(badJSON.status == 400)
            #expect((badJSON.json?["error"] as? [String: Any])?["code"] as? String == "invalid_json")
            let noBatch = try await h.post(json: #"{"messages":[]}"#)
            #expect(noBatch.status == 400)
            #expect((noBatch.json?["error"] as? [String: Any])?["field"] as? String == "batch")

            let missingKey = try await h.send(.POST, "/v1/batch", body: Array(Fixtures.batch([]).utf8), headers: [("Content-Type", "application/json")])
            #expect(missingKey.status == 401)
            let unknownKey = try await h.post(json: Fixtures.batch([]), key: "ork_unknown")
            #expect(unknownKey.status == 401)

            let wrongType = try await h.send(.POST, "/v1/batch", body: Array("batch=1".utf8), headers: [("Content-Type", "application/x-www-form-urlencoded")])
            #expect(wrongType.status == 415)

            // Over the limit: the 5th request of a burst of 4 with (almost) no refill.
            for _ in 0..<3 { #expect(try await h.post(json: Fixtures.batch([])).status == 200) }
            let limited = try await h.post(json: Fixtures.batch([]))
            #expect(limited.status == 429)
            #expect(limited.header("Retry-After") != nil)
        }
    }

    @Test func aMethodAPathDoesNotServeIs405WithAllowAndAnUnknownPathIs404() async throws {
        try await withServer { h in
            for (method, path, allow) in [
                (HTTPMethod.GET, "/v1/batch", "POST, OPTIONS"), (.DELETE, "/v1/track", "POST, OPTIONS"), (.PUT, "/healthz", "GET"),
                (.POST, "/metrics", "GET"), (.PATCH, "/v1/projects/any-key/settings", "GET, OPTIONS"),
            ] {
                let reply = try await h.send(method, path)
                #expect(reply.status == 405, "\(method) \(path)")
                #expect(reply.header("Allow") == allow, "\(method) \(path)")
                #expect((reply.json?["error"] as? [String: Any])?["code"] as? String == "method_not_allowed")
            }
            let unknown = try await h.send(.GET, "/v2/batch")
            #expect(unknown.status == 404)
            #expect((unknown.json?["error"] as? [String: Any])?["code"] as? String == "not_found")
            #expect(try await h.send(.GET, "/v1/projects/a/b/settings").status == 404)
        }
    }

    @Test func bodyLimitsAndGzip() async throws {
        try await withServer { h in
            let big = Fixtures.batch([Fixtures.track("x")]).replacingOccurrences(of: "\"attempt\":1", with: "\"pad\":\"\(String(repeating: "a", count: 600 * 1024))\"")
            let tooLarge = try await h.post(json: big)
            #expect(tooLarge.status == 413)

            // A gzip bomb: 64 MB of zeros compresses to ~64 KB; it must be cut off while inflating.
            var zeros = ByteBuffer(repeating: 0x20, count: 64 << 20)
            let bomb = try zeros.compress(with: .gzip())
            let basic = Data((h.key + ":").utf8).base64EncodedString()
            let bombed = try await h.send(
                .POST, "/v1/batch", body: Array(buffer: bomb),
                headers: [("Content-Type", "application/json"), ("Content-Encoding", "gzip"), ("Authorization", "Basic \(basic)")])
            #expect(bombed.status == 413)

            var small = ByteBuffer(string: Fixtures.batch([Fixtures.track("gz1")]))
            let gz = try small.compress(with: .gzip())
            let zipped = try await h.send(
                .POST, "/v1/batch", body: Array(buffer: gz),
                headers: [("Content-Type", "application/json"), ("Content-Encoding", "gzip"), ("Authorization", "Basic \(basic)")])
            #expect(zipped.status == 200)
            #expect(zipped.json?["accepted"] as? Int == 1)

            let brotli = try await h.post(json: "{}", extraHeaders: [("Content-Encoding", "br")])
            #expect(brotli.status == 415)
        }
    }

    /// "At once" is shown by order, not by a clock: while a table lock holds
    /// every writer's commit and one request waits in the full queue, the next
    /// request is answered 503 before any of those is answered; once the lock
    /// goes, all of them are stored. The commit timeout is set far out: under
    /// ThreadSanitizer the setup outlasted the default 30 s, and the held
    /// requests were answered 503 `commit_timeout` before the lock went.
    @Test func saturatedWriterAnswers503AtOnce() async throws {
        try await withServer(configure: { $0.maxQueuedRequests = 1; $0.writers = 2; $0.commitTimeout = .seconds(600) }) { h in
            // A connection of its own, outside any pool: a pool rolls back what a borrower leaves open.
            let locker = try Connection.connect(h.databaseURL)
            try locker.executeScript("BEGIN; LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
            let waitingOnLock = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            var held: [Task<Harness.Reply, any Error>] = []
            for writer in 1...2 {
                held.append(Task { try await h.post(json: Fixtures.batch([Fixtures.track("held\(writer)")])) })
                try await waitUntil { try await h.count(waitingOnLock) == writer }
            }
            let queued = Task { try await h.post(json: Fixtures.batch([Fixtures.track("queued")])) }
            try await waitUntil { try await h.metric("onramp_commit_queue_requests") == 1 }

            let refused = try await h.post(json: Fixtures.batch([Fixtures.track("refused")]))
            #expect(refused.status == 503)
            #expect(refused.header("Retry-After") != nil)
            #expect((refused.json?["error"] as? [String: Any])?["code"] as? String != nil)
            #expect(try await h.count(waitingOnLock) == 2)

            try locker.executeScript("COMMIT")
            for request in held + [queued] { #expect(try await request.value.status == 200) }
            #expect(try await h.count("SELECT count(*) FROM events WHERE message_id IN ('held1', 'held2', 'queued')") == 3)
            #expect(try await h.count("SELECT count(*) FROM events WHERE message_id = 'refused'") == 0)
        }
    }

    /// PostgreSQL that hangs without refusing (here: a held lock) must not
    /// hang the client: past the commit timeout it gets a 503 it can act on.
    /// The commit itself lands once the lock goes, and the client's retry of
    /// the same batch is then counted as duplicates: stored once either way.
    @Test func hungCommitAnswers503AndTheRetryIsStoredOnce() async throws {
        try await withServer(configure: { $0.commitTimeout = .seconds(1) }) { h in
            let locker = try Connection.connect(h.databaseURL)
            try locker.executeScript("BEGIN; LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
            let batch = Fixtures.batch([Fixtures.track("hung1"), Fixtures.track("hung2")])
            let timedOut = try await h.post(json: batch)
            #expect(timedOut.status == 503)
            #expect(timedOut.header("Retry-After") == "1")
            #expect((timedOut.json?["error"] as? [String: Any])?["code"] as? String == "commit_timeout")
            // The commit is still waiting on the lock, not abandoned.
            let waitingOnLock = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            #expect(try await h.count(waitingOnLock) == 1)

            try locker.executeScript("COMMIT")
            let stored = "SELECT count(*) FROM events WHERE message_id IN ('hung1', 'hung2')"
            try await waitUntil { try await h.count(stored) == 2 }
            let retried = try await h.post(json: batch)
            #expect(retried.status == 200)
            #expect(retried.json?["accepted"] as? Int == 0)
            #expect(retried.json?["duplicates"] as? Int == 2)
            #expect(try await h.count(stored) == 2)
        }
    }

    @Test func healthReadinessMetricsSettings() async throws {
        try await withServer { h in
            #expect(try await h.send(.GET, "/healthz").status == 200)
            #expect(try await h.send(.GET, "/readyz").status == 200)
            _ = try await h.post(json: Fixtures.batch([Fixtures.track("m1"), Fixtures.track("m1")]))
            let metrics = try await h.send(.GET, "/metrics")
            #expect(metrics.status == 200)
            for name in ["onramp_http_requests_total", "onramp_messages_total", "onramp_commit_duration_seconds", "onramp_group_commit_requests", "onramp_db_pool_connections"] {
                #expect(metrics.body.contains(name), "missing \(name)")
            }
            // By app: one accepted, one duplicate; then one quarantined by its reason.
            _ = try await h.post(json: Fixtures.batch([#"{"type": "track", "messageId": "m2", "anonymousId": "a", "timestamp": "\#(Fixtures.iso(Date()))"}"#]))
            let lines = try await h.send(.GET, "/metrics").body.split(separator: "\n").map(String.init)
            func value(_ series: String) -> Double? {
                lines.first { $0.hasPrefix(series + " ") }.flatMap { Double($0.dropFirst(series.count + 1)) }
            }
            #expect(value(#"onramp_messages_total{app="yoked",outcome="accepted"}"#) == 1)
            #expect(value(#"onramp_messages_total{app="yoked",outcome="duplicate"}"#) == 1)
            #expect(value(#"onramp_messages_total{app="yoked",outcome="rejected"}"#) == 1)
            #expect(value(#"onramp_quarantined_messages_total{app="yoked",reason="missing_event"}"#) == 1, "\(lines.filter { $0.contains("quarantined") })")
            #expect((value(#"onramp_received_bytes_total{app="yoked"}"#) ?? 0) > 100)
            let last = try #require(value(#"onramp_last_accepted_timestamp_seconds{app="yoked"}"#))
            #expect(abs(last - Date().timeIntervalSince1970) < 120)
            let settings = try await h.send(.GET, "/v1/projects/\(h.key)/settings")
            #expect(settings.status == 200)
            let integrations = settings.json?["integrations"] as? [String: Any]
            #expect((integrations?["Segment.io"] as? [String: Any])?["apiHost"] as? String != nil)
            #expect(try await h.send(.GET, "/v1/projects/ork_nope/settings").status == 401)
        }
    }

    @Test func revokedKeyIsRefused() async throws {
        try await withServer(configure: { $0.keyCacheTTL = .milliseconds(300) }) { h in
            let store = WriteKeyStore(pool: h.pool)
            let key = try await store.create(app: "ops")
            #expect(try await h.post(json: Fixtures.batch([]), key: key).status == 200)
            #expect(try await store.revoke(key) == 1)
            // The server caches lookups for keyCacheTTL.
            try await Task.sleep(for: .milliseconds(600))
            #expect(try await h.post(json: Fixtures.batch([]), key: key).status == 401)
        }
    }
}

@Suite struct AuthAndStorageTests {
    @Test func basicBearerAndBodyKeyAllWorkAndAppComesFromTheKey() async throws {
        try await withServer { h in
            #expect(try await h.post(json: Fixtures.batch([Fixtures.track("a1")])).status == 200)
            let bearer = try await h.send(
                .POST, "/v1/batch", body: Array(Fixtures.batch([Fixtures.track("a2")]).utf8),
                headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(h.key)")])
            #expect(bearer.status == 200)
            let inBody = #"{"writeKey":"\#(h.key)","app":"ops","batch":[\#(Fixtures.track("a3"))]}"#
            let body = try await h.send(.POST, "/v1/batch", body: Array(inBody.utf8), headers: [("Content-Type", "application/json")])
            #expect(body.status == 200)
            #expect(try await h.count("SELECT count(*) FROM events WHERE app = 'yoked'") == 3)
        }
    }

    @Test func duplicatesInsideAndAcrossBatches() async throws {
        try await withServer { h in
            let first = try await h.post(json: Fixtures.batch([Fixtures.track("d1"), Fixtures.track("d2"), Fixtures.track("d1")]))
            #expect(first.json?["accepted"] as? Int == 2)
            #expect(first.json?["duplicates"] as? Int == 1)
            let second = try await h.post(json: Fixtures.batch([Fixtures.track("d2"), Fixtures.track("d3")]))
            #expect(second.json?["accepted"] as? Int == 1)
            #expect(second.json?["duplicates"] as? Int == 1)
            #expect(try await h.count("SELECT count(*) FROM events") == 3)
        }
    }

    @Test func sameBatchTwiceConcurrentlyStoresOneCopy() async throws {
        try await withServer { h in
            let body = Fixtures.batch((0..<50).map { Fixtures.track("c\($0)") })
            let replies = try await withThrowingTaskGroup(of: Harness.Reply.self) { group in
                for _ in 0..<2 { group.addTask { try await h.post(json: body) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(replies.allSatisfy { $0.status == 200 })
            #expect(replies.compactMap { $0.json?["accepted"] as? Int }.reduce(0, +) == 50)
            #expect(try await h.count("SELECT count(*) FROM events") == 50)
        }
    }

    @Test func deviceClockTwoHoursOffIsCorrectedAndAGoodClockIsNot() async throws {
        try await withServer { h in
            let now = Date()
            let skewed = now.addingTimeInterval(-7200)
            let wrong = Fixtures.batch([Fixtures.track("k1", at: skewed.addingTimeInterval(-30))], sentAt: skewed)
            #expect(try await h.post(json: wrong).status == 200)
            let right = Fixtures.batch([Fixtures.track("k2", at: now.addingTimeInterval(-30))], sentAt: now.addingTimeInterval(-2))
            #expect(try await h.post(json: right).status == 200)
            // The skew taken out is receipt minus `sentAt`: two hours, plus
            // however long the request took to arrive (seconds, on two busy cores).
            let arrival = Date().timeIntervalSince(now)
            let rows = try await h.pool.query(
                """
                SELECT message_id, extract(epoch FROM received_at - "timestamp")::float8,
                       extract(epoch FROM "timestamp" - original_timestamp)::float8, sent_at IS NOT NULL
                FROM events ORDER BY message_id
                """).rows
            // k1: about 30 s before receipt (the skew is taken out), original kept two hours earlier.
            #expect(abs(try rows[0].decode(Double.self, at: 1) - 30) < 5)
            let shift = try rows[0].decode(Double.self, at: 2)
            #expect(shift > 7200 - 1 && shift < 7200 + arrival + 1, "\(shift) s, the requests arrived within \(arrival) s")
            #expect(try rows[0].decode(Bool.self, at: 3))
            // k2: 2 s of skew is latency, the client's time is kept exactly.
            #expect(try rows[1].decode(Double.self, at: 2) == 0)
        }
    }

    @Test func retryAfterClientTimeoutStoresNothingTwice() async throws {
        try await withServer { h in
            let messages = (0..<20).map { Fixtures.track("r\($0)") }
                + (0..<5).map { #"{"type":"track","event":"no_id_\#($0)","anonymousId":"d","timestamp":"2026-01-01T00:00:00Z"}"# }
            let body = Fixtures.batch(messages.map { $0.replacingOccurrences(of: "2026-01-01T00:00:00Z", with: Fixtures.iso(Date())) })
            let basic = Data((h.key + ":").utf8).base64EncodedString()
            // The client gives up almost at once; the server may still commit.
            _ = try? await h.send(
                .POST, "/v1/batch", body: Array(body.utf8),
                headers: [("Content-Type", "application/json"), ("Authorization", "Basic \(basic)")], timeout: .milliseconds(1))
            try await Task.sleep(for: .milliseconds(300))
            let retry = try await h.post(json: body)
            #expect(retry.status == 200)
            let again = try await h.post(json: body)
            #expect(again.json?["duplicates"] as? Int == 25)
            #expect(try await h.count("SELECT count(*) FROM events") == 25)
        }
    }

    @Test func quarantineKeepsRawJSONAndReasonAndTheRestOfTheBatchIsStored() async throws {
        try await withServer { h in
            let bad = #"{"type":"track","event":"otp_verified","messageId":"bad1","anonymousId":"d","timestamp":"not a date"}"#
            let reply = try await h.post(json: Fixtures.batch([Fixtures.track("good1"), bad]))
            #expect(reply.status == 200)
            #expect(reply.json?["accepted"] as? Int == 1)
            let rejected = try #require((reply.json?["rejected"] as? [[String: Any]])?.first)
            #expect(rejected["index"] as? Int == 1)
            #expect(rejected["code"] as? String == "invalid_timestamp")
            #expect(rejected["messageId"] as? String == "bad1")
            let row = try #require(try await h.pool.query("SELECT app, reason_code, raw, batch_index FROM quarantine").first)
            #expect(try row.decode(String.self, at: 0) == "yoked")
            #expect(try row.decode(String.self, at: 1) == "invalid_timestamp")
            #expect(try row.decode(String.self, at: 2).contains("not a date"))
            #expect(try row.decode(Int.self, at: 3) == 1)
        }
    }

    @Test func piiIsRemovedOrHashedPerApp() async throws {
        try await withServer(configure: { $0.policy.pii["ops"] = PIIPolicy(properties: ["email"], mode: .hash) }) { h in
            let message = #"{"type":"track","event":"signup","messageId":"p1","anonymousId":"d","properties":{"email":"x@y.z","phone":"+1","plan":"pro"}}"#
            #expect(try await h.post(json: Fixtures.batch([message])).status == 200)
            let opsKey = try await WriteKeyStore(pool: h.pool).create(app: "ops")
            #expect(try await h.post(json: Fixtures.batch([message]), key: opsKey).status == 200)
            let yoked = try await h.pool.query("SELECT properties::text FROM events WHERE app = 'yoked'").scalar(String.self)
            #expect(!yoked.contains("email") && !yoked.contains("phone") && yoked.contains("pro"))
            let ops = try await h.pool.query("SELECT properties->>'email' FROM events WHERE app = 'ops'").scalar(String.self)
            #expect(ops.hasPrefix("sha256:"))
        }
    }

    @Test("an app enforcing its tracking plan: a message that keeps it is stored; an unplanned event, a missing or mistyped property are quarantined naming the rule; another app is untouched")
    func trackingPlanEnforced() async throws {
        let configuration = try FunnelConfiguration.parse(yaml: """
            apps:
              - name: yoked
                tracking_plan:
                  enforce: true
                  events:
                    - event: otp_verified
                      properties: {method: string, attempt: number}
                    - screen: welcome
              - name: ops
                tracking_plan:
                  events: [{event: signup}]
            funnels:
              - {name: f, app: yoked, steps: [{event: otp_verified}, {screen: welcome}]}
            """, source: "plan.yaml")
        try await withServer(configure: { $0.policy = IngestPolicy(funnels: configuration) }) { h in
            func message(_ id: String, _ body: String) -> String { #"{"messageId":"\#(id)","anonymousId":"d",\#(body)}"# }
            let reply = try await h.post(json: Fixtures.batch([
                message("keeps", #""type":"track","event":"otp_verified","properties":{"method":"sms","attempt":1}"#),
                message("screen", #""type":"screen","name":"welcome""#),
                message("identify", #""type":"identify","userId":"u1""#),
                message("unplanned", #""type":"track","event":"otp_verifed","properties":{"method":"sms","attempt":1}"#),
                message("missing", #""type":"track","event":"otp_verified","properties":{"attempt":1}"#),
                message("null", #""type":"track","event":"otp_verified","properties":{"method":null,"attempt":1}"#),
                message("mistyped", #""type":"track","event":"otp_verified","properties":{"method":"sms","attempt":"1"}"#),
            ]))
            #expect(reply.status == 200)
            #expect(reply.json?["accepted"] as? Int == 3)
            let stored = try await h.pool.query("SELECT message_id FROM events ORDER BY message_id").rows.map { $0.text(at: 0) ?? "" }
            #expect(stored == ["identify", "keeps", "screen"])
            var reasons: [String: String] = [:]
            for row in try await h.pool.query("SELECT reason_code, reason FROM quarantine WHERE app = 'yoked'").rows {
                #expect(row.text(at: 0) == "tracking_plan")
                let detail = row.text(at: 1) ?? ""
                reasons[detail] = detail
            }
            #expect(Set(reasons.keys) == [
                #"event "otp_verifed" is not in yoked's tracking plan"#,
                #"event "otp_verified" needs properties.method (string) by yoked's tracking plan"#,
                #"properties.attempt of event "otp_verified" is string; yoked's tracking plan says number"#,
            ], "\(reasons.keys.sorted())")
            #expect(try await h.count("SELECT count(*) FROM quarantine WHERE app = 'yoked'") == 4)
            // ops has a plan but does not enforce it: stored, counted at night.
            let opsKey = try await WriteKeyStore(pool: h.pool).create(app: "ops")
            #expect(try await h.post(json: Fixtures.batch([message("ops-1", #""type":"track","event":"anything""#)]), key: opsKey).json?["accepted"] as? Int == 1)
        }
    }

    @Test func analystColumnsAreFilled() async throws {
        try await withServer { h in
            let body = #"""
                {"context":{"os":{"name":"iOS","version":"17.1"},"app":{"version":"1.0"}},"sentAt":"\#(Fixtures.iso(Date()))","batch":[
                 {"type":"screen","name":"companySetup","messageId":"sc1","anonymousId":"dev","userId":"u1","properties":{"flow":"company_creator"},
                  "context":{"app":{"version":"2.3.0"}}},
                 {"type":"identify","messageId":"id1","anonymousId":"dev","userId":"u1","traits":{"plan":"pro"}},
                 {"type":"page","name":"Home","messageId":"pg1","anonymousId":"dev"},
                 {"type":"group","groupId":"g1","messageId":"gr1","userId":"u1","traits":{"name":"Acme","seats":12}},
                 {"type":"alias","previousId":"dev","messageId":"al1","userId":"u1"}]}
                """#
            let reply = try await h.post("/v1/batch", json: body)
            #expect(reply.json?["accepted"] as? Int == 5)
            let row = try #require(try await h.pool.query(
                "SELECT type, event, user_id, anonymous_id, context->'app'->>'version', context->'os'->>'name', properties->>'flow' FROM events WHERE message_id = 'sc1'"
            ).first)
            #expect(try row.decode(String.self, at: 0) == "screen")
            #expect(try row.decode(String.self, at: 1) == "companySetup")
            #expect(try row.decode(String.self, at: 2) == "u1")
            #expect(try row.decode(String.self, at: 4) == "2.3.0")
            #expect(try row.decode(String.self, at: 5) == "iOS")
            #expect(try row.decode(String.self, at: 6) == "company_creator")
            #expect(try await h.count("SELECT count(DISTINCT type) FROM events") == 5)
            #expect(try await h.count("SELECT count(*) FROM events WHERE type = 'identify' AND traits->>'plan' = 'pro'") == 1)
            // Nothing of an alias or a group is dropped: analysts read them as Segment's warehouses name them.
            let joined = try await h.pool.query(
                """
                SELECT type, coalesce(previous_id, ''), coalesce(group_id, ''), coalesce(traits->>'name', ''), user_id
                FROM analytics.events WHERE type IN ('alias', 'group') ORDER BY type
                """
            ).rows.map { row in try (0..<5).map { try row.decode(String.self, at: $0) } }
            #expect(joined == [["alias", "dev", "", "", "u1"], ["group", "", "g1", "Acme", "u1"]])
            #expect(try await h.count("SELECT count(*) FROM analytics.events WHERE previous_id IS NOT NULL OR group_id IS NOT NULL") == 2)
        }
    }

    @Test("an alias without previousId or userId, or a group without groupId, is quarantined naming the field")
    func aliasAndGroupNeedTheirIds() async throws {
        try await withServer { h in
            let body = #"""
                {"batch":[
                 {"type":"alias","messageId":"a1","userId":"u1"},
                 {"type":"alias","messageId":"a2","anonymousId":"dev","previousId":"dev"},
                 {"type":"group","messageId":"g1","userId":"u1","traits":{"name":"Acme"}},
                 {"type":"group","messageId":"g2","userId":"u1","groupId":{"id":1}},
                 {"type":"alias","messageId":"a3","userId":"u1","previousId":42},
                 {"type":"group","messageId":"g3","anonymousId":"dev","groupId":"acme"}]}
                """#
            let reply = try await h.post("/v1/batch", json: body)
            #expect(reply.json?["accepted"] as? Int == 2)
            let rejected = (reply.json?["rejected"] as? [[String: Any]] ?? []).map { "\($0["index"] ?? "") \($0["code"] ?? "")" }
            #expect(rejected == ["0 missing_previous_id", "1 missing_user_id", "2 missing_group_id", "3 invalid_group_id"])
            #expect(try await h.count("SELECT count(*) FROM quarantine WHERE reason_code IN ('missing_previous_id', 'missing_user_id', 'missing_group_id', 'invalid_group_id')") == 4)
            #expect(try await h.count("SELECT count(*) FROM events WHERE previous_id = '42' OR group_id = 'acme'") == 2)
        }
    }

    @Test func singleMessageEndpoints() async throws {
        try await withServer { h in
            let track = try await h.post("/v1/track", json: #"{"event":"otp_verified","messageId":"t1","anonymousId":"d"}"#)
            #expect(track.status == 200)
            let screen = try await h.post("/v1/screen", json: #"{"name":"welcome","messageId":"s1","anonymousId":"d"}"#)
            #expect(screen.status == 200)
            let identify = try await h.post("/v1/identify", json: #"{"userId":"u","anonymousId":"d","messageId":"i1","traits":{}}"#)
            #expect(identify.status == 200)
            #expect(try await h.count("SELECT count(*) FROM events") == 3)
        }
    }
}

/// One message PostgreSQL cannot store must never fail its batch: a 5xx is
/// retried by every client with the same batch, forever.
@Suite struct UnstorableMessageTests {
    @Test func aNULInAMessageIdIsQuarantinedAndTheRestIsStored() async throws {
        try await withServer { h in
            let bad = #"{"type":"track","event":"otp_verified","messageId":"bad\u0000id","anonymousId":"d"}"#
            let body = Fixtures.batch([Fixtures.track("good-1"), bad, Fixtures.track("good-2")])
            let reply = try await h.post(json: body)
            #expect(reply.status == 200, "\(reply.body)")
            #expect(reply.json?["accepted"] as? Int == 2)
            let rejected = try #require((reply.json?["rejected"] as? [[String: Any]])?.first)
            #expect(rejected["index"] as? Int == 1)
            #expect(rejected["code"] as? String == "invalid_text")
            #expect(rejected["messageId"] as? String == "bad\u{0}id", "the answer gives the id as sent")
            #expect(try await h.count("SELECT count(*) FROM events WHERE message_id IN ('good-1', 'good-2')") == 2)
            // The quarantine keeps it: the id with the NUL escaped, the raw message as JSON.
            let row = try #require(try await h.pool.query("SELECT message_id, reason_code, raw FROM quarantine").first)
            #expect(try row.decode(String.self, at: 0) == #"bad\u0000id"#)
            #expect(try row.decode(String.self, at: 1) == "invalid_text")
            #expect(try row.decode(String.self, at: 2).contains(#""messageId":"bad\u0000id""#))
            // The retry a client makes is answered the same way, the good ones now duplicates.
            let retry = try await h.post(json: body)
            #expect(retry.status == 200)
            #expect(retry.json?["duplicates"] as? Int == 2)
            #expect(try await h.count("SELECT count(*) FROM quarantine") == 2)
        }
    }

    @Test func everyRequestValueThatTextCannotHoldFailsOnlyItsMessage() async throws {
        try await withServer { h in
            let zalgo = "a" + String(repeating: "\u{301}", count: 3_000)
            let hostile = [
                #"{"type":"track","event":"e\u0000","anonymousId":"d"}"#,
                #"{"type":"screen","name":"s","anonymousId":"d\u0000"}"#,
                #"{"type":"identify","userId":"u\u0000"}"#,
                #"{"type":"track","event":"e","anonymousId":"d","properties":{"k\u0000":1}}"#,
                #"{"type":"track","event":"e","anonymousId":"d","context":{"os":{"name":"\u0000"}}}"#,
                #"{"type":"identify","userId":"u","traits":{"a":["\u0000"]}}"#,
                #"{"type":"track","event":"e","anonymousId":"d","messageId":"\#(zalgo)"}"#,
                #"{"type":"track","event":"e","anonymousId":"\#(zalgo)"}"#,
                #"{"type":"track","event":"e","userId":"\#(zalgo)"}"#,
            ]
            let reply = try await h.post(json: Fixtures.batch([Fixtures.track("ok-1")] + hostile))
            #expect(reply.status == 200, "\(reply.body)")
            #expect(reply.json?["accepted"] as? Int == 1)
            #expect((reply.json?["rejected"] as? [Any])?.count == hostile.count)
            #expect(try await h.count("SELECT count(*) FROM quarantine") == hostile.count)
            // Batch-level context goes into every message: each is refused, the request is not.
            let context = #"{"batch":[\#(Fixtures.track("ok-2"))],"context":{"app":{"name":"x\u0000"}}}"#
            let contextReply = try await h.post(json: context)
            #expect(contextReply.status == 200, "\(contextReply.body)")
            #expect((contextReply.json?["rejected"] as? [[String: Any]])?.first?["code"] as? String == "invalid_text")
            // A NUL in a write key is an unknown key, not a failed lookup.
            #expect(try await h.post(json: Fixtures.batch([]), key: "ork_\u{0}").status == 401)
        }
    }
}
