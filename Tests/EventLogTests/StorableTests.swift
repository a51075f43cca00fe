import EventLog
import Foundation
import Testing

private let now = RFC3339.parse("2026-11-21T12:00:00Z") ?? 0

private func validate(_ json: String, context: [String: JSONValue] = [:]) throws -> MessageValidator.Outcome {
    let message = try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8))
    return MessageValidator.validate(
        IncomingBatch(messages: [message], context: context), app: "yoked", receivedAt: now, policy: IngestPolicy())
}

/// Values PostgreSQL refuses are refused per message, naming the field, and a
/// quarantine row is always storable.
@Suite struct StorableTests {
    @Test(arguments: [
        (#"{"type":"track","event":"x","anonymousId":"a","messageId":"bad\u0000id"}"#, "\"messageId\""),
        (#"{"type":"track","event":"x","anonymousId":"a","properties":{"list":[1,{"k":"a\u0000"}]}}"#, "\"properties.list[1].k\""),
        (#"{"type":"track","event":"x","anonymousId":"a","context":{"device":{"na\u0000me":1}}}"#, #""context.device.na\u0000me""#),
        (#"{"type":"track","event":"x","anonymousId":"a","traits":{"\u0000":true}}"#, #""traits.\u0000""#),
    ])
    func aNULIsRefusedNamingItsPath(json: String, named: String) throws {
        let outcome = try validate(json)
        #expect(outcome.events.isEmpty)
        let rejection = try #require(outcome.rejections.first)
        #expect(rejection.code == "invalid_text")
        #expect(rejection.message.hasPrefix(named), "\(rejection.message)")
        #expect(!rejection.raw.utf8.contains(0), "the raw JSON escapes the NUL")
    }

    @Test func aNULInTheBatchContextRefusesEveryMessageNamingIt() throws {
        let outcome = try validate(
            #"{"type":"track","event":"x","anonymousId":"a"}"#, context: ["app": .object(["name": .string("b\u{0}")])])
        #expect(outcome.events.isEmpty)
        #expect(outcome.rejections.first?.code == "invalid_text")
        #expect(outcome.rejections.first?.message.hasPrefix("the batch's \"context.app.name\"") == true)
    }

    /// A grapheme can carry any number of combining marks: 255 "characters" had no
    /// byte bound, and an index entry over 2,704 bytes failed the whole commit.
    @Test func identifiersBeyondTheIndexLimitAreRefused() throws {
        let zalgo = "a" + String(repeating: "\u{301}", count: 2_000)
        #expect(zalgo.count == 1)
        for field in ["messageId", "anonymousId", "userId"] {
            let identity = field == "anonymousId" ? "" : #","anonymousId":"a""#
            let outcome = try validate(#"{"type":"track","event":"x","\#(field)":"\#(zalgo)"\#(identity)}"#)
            #expect(outcome.events.isEmpty, "\(field)")
            #expect(outcome.rejections.first?.message.contains("\(Storable.maxIndexedBytes) bytes") == true, "\(field)")
        }
        let longest = String(repeating: "é", count: 255)  // 510 bytes: still accepted
        #expect(try validate(#"{"type":"track","event":"x","anonymousId":"\#(longest)"}"#).events.count == 1)
    }

    @Test func theLastCheckLooksAtTheStoredValues() {
        func event(context: String = "{}", user: String? = nil) -> NewEvent {
            NewEvent(
                app: "yoked", type: .track, messageID: "m", event: "x", anonymousID: "a", userID: user, timestamp: now,
                originalTimestamp: nil, sentAt: nil, receivedAt: now, properties: "{}", context: context, traits: nil)
        }
        #expect(Storable.problem(in: event()) == nil)
        #expect(Storable.problem(in: event(context: #"{"a":"\u0000"}"#))?.field == "context")
        #expect(Storable.problem(in: event(context: #"{"a":"\\u0000"}"#)) == nil, "an escaped backslash, then text")
        #expect(Storable.problem(in: event(context: #"{"a":"\\\u0000"}"#))?.field == "context")
        #expect(Storable.problem(in: event(user: "u\u{0}"))?.field == "userId")
        #expect(Storable.problem(in: event(user: String(repeating: "ü", count: 600)))?.field == "userId")
    }

    @Test func quarantineTextEscapesNULAsJSONDoes() {
        #expect(Storable.text("bad\u{0}id") == #"bad\u0000id"#)
        #expect(Storable.text("\u{0}\u{0}") == #"\u0000\u0000"#)
        #expect(Storable.text("plain ✓") == "plain ✓")
    }
}
