import Delivery
import Foundation
import Funnels
import LibPQ
import LocalPostgres
import NIOConcurrencyHelpers
import Privacy
import Projection
import TestSupport
import Testing

/// Audiences' changes delivered to a real receiver (scripts/lib/audience_receiver.py,
/// a separate process checking every signature), which dies mid-batch,
/// stays down, answers 500 and 429, and comes back (docs/audiences.md, "Delivering").
@Suite("delivering audiences' changes to a real receiver", .serialized)
struct AudienceDeliveryTests {
    static let secret = AudienceReceiver.secret
    static let hour: TimeInterval = 3600

    static func configuration(port: Int) throws -> FunnelConfiguration {
        try FunnelConfiguration.parse(yaml: AudienceReference.signupConfiguration + """
              - name: started
                funnel: signup
                outcome: reached
                step: 1
                deliver: {url: "http://127.0.0.1:\(port)/hook", traits: [traits.email]}
              - name: completed
                funnel: signup
                outcome: completed
                deliver: {url: "http://127.0.0.1:9/nothing-listens", max_attempts: 2}
            """, source: "deliveries.yaml")
    }

    /// `count` persons who start, a third of whom complete, and one identify with an email each.
    static func persons(_ range: Range<Int>, at base: Int64) -> [SeedEvent] {
        range.flatMap { p -> [SeedEvent] in
            let t = base + Int64(p) * 1_000_000
            var events = [SeedEvent(app: "yoked", messageId: "p\(p)-0", event: "started", anonymousId: "a\(p)", userId: "u\(p)", timestamp: t)]
            if p % 3 == 0 {
                events.append(SeedEvent(app: "yoked", messageId: "p\(p)-1", event: "phone_entered", userId: "u\(p)", timestamp: t + 60_000_000))
                events.append(SeedEvent(app: "yoked", messageId: "p\(p)-2", event: "otp_verified", userId: "u\(p)", timestamp: t + 120_000_000))
            }
            return events
        }
    }

    static func identify(_ c: Connection, persons: Range<Int>, at base: Int64) throws {
        for p in persons {
            try c.query(
                """
                WITH e AS (
                    INSERT INTO events (app, type, message_id, user_id, "timestamp", original_timestamp, received_at, traits, properties, context)
                    VALUES ('yoked', 'identify', $1, $2, $3, $3, $3, $4::jsonb, '{}', '{}') RETURNING app, message_id, seq, received_at)
                INSERT INTO event_ids (app, message_id, seq, received_at) SELECT * FROM e
                """, [.text("p\(p)-identify"), .text("u\(p)"), .microseconds(base), .json(#"{"email": "u\#(p)@example.com"}"#)])
        }
    }

    @Test("a receiver killed mid-batch, down, answering 500 and 429, then back, gets every change at least once, duplicates only by delivery id, every signature valid; an erased member is never sent; a dead receiver's changes are dead-lettered, then retried")
    func everyChangeArrives() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("receiver-\(UUID().uuidString).jsonl")
        defer { try? FileManager.default.removeItem(at: log) }
        // Dies on its first batch, after reading it.
        var receiver = try AudienceReceiver(port: 0, log: log, actions: ["die"])
        defer { receiver.stop() }
        let port = receiver.port
        let configuration = try Self.configuration(port: port)
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        var deliverer = try Deliverer(configuration: configuration, environment: ["ONRAMP_DELIVERY_SECRET": Self.secret])
        deliverer.batchSize = 7
        // A receiver not listening costs a try its whole timeout (the client retries the connection until then).
        deliverer.timeout = .seconds(2)
        // The deliverer's clock, moved on by hand: a minute ahead of the runs that queue.
        let clock = NIOLockedValueBox(Date().addingTimeInterval(60))
        func advance() { clock.withLockedValue { $0 = $0.addingTimeInterval(2 * Self.hour) } }

        let base = Timestamps.microseconds(Date()) - 3_600_000_000
        try await pool.withConnection { c in
            try EventSeeder.insert(c, Self.persons(0..<30, at: base))
            try Self.identify(c, persons: 0..<30, at: base)
        }
        _ = try await pool.withConnection { try job.runAudiences($0) }
        let queued = try await pool.query("SELECT count(*) FROM audience_deliveries WHERE audience = 'started'").scalar(Int.self)
        #expect(queued == 30, "a new delivery sends the members first")

        // Killed mid-batch, then down.
        var sent = try await deliverer.run(pool) { clock.withLockedValue { $0 } }
        #expect(sent.delivered == 0 && sent.failed > 0, "\(sent)")
        try await receiver.exited()
        advance()
        sent = try await deliverer.run(pool) { clock.withLockedValue { $0 } }
        #expect(sent.delivered == 0)

        // Meanwhile more persons start, and one is erased before anything of theirs is delivered.
        try await pool.withConnection { c in try EventSeeder.insert(c, Self.persons(30..<45, at: base + 100_000_000)) }
        _ = try await pool.withConnection { try job.runAudiences($0) }
        let erasure = Erasure(app: "yoked", userIds: ["u5"], anonymousIds: [], requestedBy: "test", suppress: true)
        _ = try await erasure.run(job, databaseURL: db.url)
        #expect(try await pool.query("SELECT count(*) FROM audience_deliveries WHERE person_id = 'u5'").scalar(Int.self) == 0)

        // Back: a 500, then a 429 asking for ten minutes.
        receiver = try AudienceReceiver(port: port, log: log, actions: ["500", "429:600"])
        advance()
        sent = try await deliverer.run(pool) { clock.withLockedValue { $0 } }
        #expect(sent.delivered == 0)
        advance()
        let before = clock.withLockedValue { $0 }
        sent = try await deliverer.run(pool) { clock.withLockedValue { $0 } }
        #expect(sent.delivered == 0)
        // The oldest changes go first, so the first batch was tried four times.
        let soonest = try await pool.query(
            "SELECT min(extract(epoch FROM next_attempt_at))::float8 FROM audience_deliveries WHERE audience = 'started' AND attempts = 4"
        ).scalar(Double.self)
        #expect(soonest >= before.timeIntervalSince1970 + 600 - 0.001, "Retry-After is honoured")
        // Then everything, in batches; the completed audience's receiver never listens.
        for _ in 0..<8 {
            advance()
            sent = try await deliverer.run(pool) { clock.withLockedValue { $0 } }
        }
        let ledger = try await pool.query(
            "SELECT id, person_id, change, state FROM audience_deliveries WHERE audience = 'started' ORDER BY id")
        #expect(ledger.rows.count == 44)
        #expect(try ledger.rows.allSatisfy { try $0.decode(String.self, at: 3) == "delivered" })
        receiver.stop()

        let batches = try AudienceReceiver.received(log)
        #expect(batches.allSatisfy { $0.valid }, "every signature verifies")
        var seen: [String: String] = [:]
        var duplicates = 0
        for change in batches.flatMap(\.changes) {
            let id = change["delivery_id"] as? String ?? ""
            let what = "\(change["person_id"] as? String ?? "")|\(change["change"] as? String ?? "")"
            if let earlier = seen[id] {
                #expect(earlier == what, "a delivery id always names the same change")
                duplicates += 1
            }
            seen[id] = what
            #expect(change["person_id"] as? String != "u5", "an erased member is never sent")
        }
        #expect(Set(seen.keys) == Set(try ledger.rows.map { String(try $0.decode(Int64.self, at: 0)) }), "every change arrived")
        #expect(duplicates == 21, "the first batch, read four times: the receiver died on it, answered 500, then 429, then took it")
        let withEmail = batches.flatMap(\.changes).first { $0["person_id"] as? String == "u7" }
        #expect((withEmail?["traits"] as? [String: String])?["traits.email"] == "u7@example.com", "the traits the audience names")

        // The completed audience's changes died after two attempts; --retry queues them again.
        let dead = try await pool.query("SELECT count(*) FROM audience_deliveries WHERE audience = 'completed' AND state = 'dead'").scalar(Int.self)
        #expect(dead == 15)
        let retried = try await pool.withConnection { c in try DeliveryLedger.retryDead(c, now: Timestamps.microseconds(Date())) }
        #expect(retried == 15)
        await pool.close()
        try await db.drop()
    }

    @Test("a delivering audience without its secret stops before anything is written")
    func missingSecret() throws {
        let configuration = try Self.configuration(port: 1)
        #expect(throws: Deliverer.SetupError.self) { try Deliverer(configuration: configuration, environment: [:]) }
        do {
            _ = try Deliverer(configuration: configuration, environment: [:])
        } catch {
            #expect("\(error)" == "audience 'started': deliver: no signing secret (set $ONRAMP_DELIVERY_SECRET, or deliver.secret_file)")
        }
    }
}
