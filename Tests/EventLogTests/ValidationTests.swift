import EventLog
import Foundation
import LibPQ
import LocalPostgres
import Testing

private let now = RFC3339.parse("2026-11-21T12:00:00Z") ?? 0

private func message(_ json: String) throws -> JSONValue {
    try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8))
}

@Suite struct ValidationTests {
    @Test(arguments: [
        ("2026-11-21T10:00:01.234Z", true), ("2026-11-21T10:00:01Z", true), ("2026-11-21T10:00:01.234567+05:30", true),
        ("2026-11-21 10:00:01+0000", true), ("2026-13-01T00:00:00Z", false), ("2026-02-30T00:00:00Z", false),
        ("2026-11-21T10:00:01", false), ("yesterday", false), ("0001-01-01T00:00:00Z", false),
        ("2026-11-21t10:00:01z", true), ("2026-11-21T10:00:01+05", true), ("2024-02-29T00:00:00Z", true),
        ("2025-02-29T00:00:00Z", false), ("2026-11-21T10:00:01.Z", false), ("2026-11-21T10:00:01+05:", false),
        ("2026-11-21T10:00:01+24:00", false), ("2026-11-21T24:00:00Z", false), ("2026-11-21T10:00:01Z ", false),
    ])
    func parsesTimestamps(text: String, valid: Bool) {
        #expect((RFC3339.parse(text) != nil) == valid)
    }

    @Test func skewBeyondSixtySecondsIsCorrected() {
        let hour: Int64 = 3_600_000_000
        // Device clock two hours behind: sentAt and the event both read two hours early.
        let corrected = ClockSkew.corrected(original: now - 2 * hour - 5_000_000, sentAt: now - 2 * hour, receivedAt: now, thresholdSeconds: 60)
        #expect(corrected == now - 5_000_000)
        // 30 s of latency is left alone.
        #expect(ClockSkew.corrected(original: now - 40_000_000, sentAt: now - 30_000_000, receivedAt: now, thresholdSeconds: 60) == now - 40_000_000)
        #expect(ClockSkew.corrected(original: nil, sentAt: nil, receivedAt: now, thresholdSeconds: 60) == now)
    }

    @Test(arguments: [
        (#"{"type":"track","anonymousId":"a","timestamp":"2026-11-21T11:00:00Z"}"#, "missing_event"),
        (#"{"type":"track","event":"","anonymousId":"a"}"#, "invalid_event"),
        (#"{"type":"track","event":"x\u0007","anonymousId":"a"}"#, "invalid_event"),
        (#"{"type":"screen","anonymousId":"a"}"#, "missing_name"),
        (#"{"type":"bogus","event":"x","anonymousId":"a"}"#, "invalid_type"),
        (#"{"event":"x","anonymousId":"a"}"#, "invalid_type"),
        (#"{"type":"track","event":"x"}"#, "missing_identity"),
        (#"{"type":"track","event":"x","userId":"","anonymousId":""}"#, "missing_identity"),
        (#"{"type":"track","event":"x","anonymousId":"a","timestamp":"nope"}"#, "invalid_timestamp"),
        (#"{"type":"track","event":"x","anonymousId":"a","timestamp":"2026-11-23T12:00:01Z"}"#, "timestamp_in_future"),
        (#"{"type":"track","event":"x","anonymousId":"a","timestamp":"2026-09-01T00:00:00Z"}"#, "timestamp_too_old"),
        (#"{"type":"track","event":"x","anonymousId":"a","properties":[1]}"#, "invalid_properties"),
        (#"{"type":"track","event":"x","anonymousId":"a","context":"ios"}"#, "invalid_context"),
        (#"{"type":"track","event":"x","anonymousId":"a","properties":{"k":"a\u0000b"}}"#, "invalid_text"),
        (#"{"type":"track","event":"x","anonymousId":{"id":1}}"#, "invalid_anonymous_id"),
        (#"{"type":"track","event":"x","anonymousId":"a","messageId":7}"#, "invalid_message_id"),
        ("[1,2]", "invalid_message"),
    ])
    func rejects(json: String, code: String) throws {
        let outcome = MessageValidator.validate(
            IncomingBatch(messages: [try message(json)]), app: "yoked", receivedAt: now, policy: IngestPolicy())
        #expect(outcome.events.isEmpty)
        #expect(outcome.rejections.first?.code == code)
        #expect(outcome.rejections.first?.raw.isEmpty == false)
    }

    @Test("a rejected message keeps its own ids, a number as its digits, for suppression to find")
    func rejectionKeepsIds() throws {
        let outcome = MessageValidator.validate(
            IncomingBatch(messages: [try message(
                #"{"type":"alias","userId":4821,"anonymousId":"a-1","previousId":"old","context":{"userId":"nested"},"timestamp":"nope"}"#)]),
            app: "yoked", receivedAt: now, policy: IngestPolicy())
        let rejection = try #require(outcome.rejections.first)
        #expect(rejection.code == "invalid_timestamp")
        #expect(rejection.userID == "4821")
        #expect(rejection.anonymousID == "a-1")
        #expect(rejection.previousID == "old")
    }

    @Test func oversizedMessageIsRejected() throws {
        let big = String(repeating: "x", count: 33 * 1024)
        let outcome = MessageValidator.validate(
            IncomingBatch(messages: [try message(#"{"type":"track","event":"x","anonymousId":"a","properties":{"b":"\#(big)"}}"#)]),
            app: "yoked", receivedAt: now, policy: IngestPolicy())
        #expect(outcome.rejections.first?.code == "message_too_large")
    }

    @Test func piiIsRemovedOrHashed() throws {
        let json = #"{"type":"identify","userId":"u1","traits":{"email":"a@b.c","name":"A"},"properties":{"Phone":"+1555","plan":"pro"}}"#
        var policy = IngestPolicy()
        let removed = MessageValidator.validate(IncomingBatch(messages: [try message(json)]), app: "yoked", receivedAt: now, policy: policy)
        #expect(removed.events.first?.event.properties == #"{"plan":"pro"}"#)
        #expect(removed.events.first?.event.traits == #"{"name":"A"}"#)
        policy.pii["yoked"] = PIIPolicy(properties: ["phone", "email"], mode: .hash)
        let hashed = MessageValidator.validate(IncomingBatch(messages: [try message(json)]), app: "yoked", receivedAt: now, policy: policy)
        let properties = try #require(hashed.events.first?.event.properties)
        #expect(properties.contains("\"Phone\":\"sha256:"))
        #expect(!properties.contains("+1555"))
    }

    @Test func deterministicIDsIgnoreSentAtAndKeyOrder() throws {
        let a = try message(#"{"type":"track","event":"x","anonymousId":"a","timestamp":"2026-11-21T11:00:00Z","sentAt":"2026-11-21T11:00:01Z"}"#)
        let b = try message(#"{"anonymousId":"a","timestamp":"2026-11-21T11:00:00Z","event":"x","type":"track","sentAt":"2026-11-21T11:30:00Z"}"#)
        let ids = [a, b].map { MessageValidator.validate(IncomingBatch(messages: [$0]), app: "y", receivedAt: now, policy: IngestPolicy()).events.first?.event.messageID }
        #expect(ids[0] != nil)
        #expect(ids[0] == ids[1])
    }

    @Test func batchContextMergesUnderMessageContext() throws {
        let batch = IncomingBatch(
            messages: [try message(#"{"type":"screen","name":"welcome","anonymousId":"a","context":{"app":{"version":"2.0"}}}"#)],
            context: ["app": .object(["version": .string("1.0"), "build": .string("7")]), "locale": .string("en-US")])
        let event = try #require(MessageValidator.validate(batch, app: "ops", receivedAt: now, policy: IngestPolicy()).events.first?.event)
        #expect(event.context == #"{"app":{"build":"7","version":"2.0"},"locale":"en-US"}"#)
        #expect(event.event == "welcome")
    }

    @Test func badBodiesNameTheField() {
        #expect(throws: BatchError(code: "invalid_json", field: "body", message: "the body is not valid JSON: expected a string key at byte 1")) {
            try BatchDecoder.decodeBatch(Data("{".utf8))
        }
        #expect(throws: BatchError(code: "missing_batch", field: "batch", message: "the body has no \"batch\" array of messages")) {
            try BatchDecoder.decodeBatch(Data("{}".utf8))
        }
    }
}

@Suite struct EventStoreTests {
    private func event(_ id: String, app: String = "yoked") -> NewEvent {
        NewEvent(
            app: app, type: .track, messageID: id, event: "otp_verified", anonymousID: "anon", userID: nil, timestamp: now,
            originalTimestamp: now, sentAt: nil, receivedAt: Timestamps.microseconds(Date()), properties: "{}", context: "{}", traits: nil)
    }

    @Test func appendIsExactlyOnce() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool()
        do {
            let first = try await pool.withConnection { try EventStore.append([event("m1"), event("m2"), event("m1"), event("m1", app: "ops")], quarantine: [], on: $0) }
            #expect(first == [.stored, .stored, .duplicate, .stored])
            let again = try await pool.withConnection { try EventStore.append([event("m2"), event("m3")], quarantine: [], on: $0) }
            #expect(again == [.duplicate, .stored])
            let count = try await pool.query("SELECT count(*) FROM events").scalar(Int.self)
            let ledger = try await pool.query("SELECT count(*) FROM event_ids").scalar(Int.self)
            #expect(count == 4)
            #expect(ledger == 4)
        } catch {
            await pool.close()
            try await db.drop()
            throw error
        }
        await pool.close()
        try await db.drop()
    }
}
