import Foundation
import NIOHTTP1
import Testing

/// Bodies exactly as Segment's SDKs build them (field sets and formats taken
/// from analytics-swift's and analytics-kotlin's serialised payloads).
@Suite struct SegmentSDKTests {
    @Test func analyticsSwiftBatch() async throws {
        try await withServer { h in
            let now = Fixtures.iso(Date())
            let body = #"""
                {"batch":[{"type":"track","event":"onboarding_started","properties":{"source":"push"},
                 "anonymousId":"A8F0C6E5-4F0B-4B6B-9C5E-5D0B3A6E2F11","messageId":"1F2E3D4C-5B6A-4978-8695-A4B3C2D1E0F9",
                 "timestamp":"\#(now)","integrations":{},
                 "context":{"app":{"name":"Yoked","version":"2.3.0","build":"231","namespace":"com.yoked.app"},
                  "device":{"manufacturer":"Apple","type":"ios","model":"iPhone15,2","name":"iPhone","id":"X"},
                  "os":{"name":"iOS","version":"17.1"},"screen":{"width":390,"height":844},"locale":"en-US","timezone":"Europe/Paris",
                  "network":{"wifi":true,"cellular":false},"library":{"name":"analytics-swift","version":"1.5.11"},
                  "instanceId":"7D5F2B8C-0000-4000-8000-000000000001"},
                 "_metadata":{"bundled":["Segment.io"],"unbundled":[],"bundledIds":[]}},
                 {"type":"screen","name":"Welcome","category":"","properties":{},"anonymousId":"A8F0C6E5-4F0B-4B6B-9C5E-5D0B3A6E2F11",
                  "messageId":"2F2E3D4C-5B6A-4978-8695-A4B3C2D1E0F9","timestamp":"\#(now)","integrations":{},"context":{"os":{"name":"iOS","version":"17.1"}}}],
                 "sentAt":"\#(now)","writeKey":"\#(h.key)"}
                """#
            let basic = Data((h.key + ":").utf8).base64EncodedString()
            let reply = try await h.send(
                .POST, "/v1/b", body: Array(body.utf8),
                headers: [("Content-Type", "application/json; charset=utf-8"), ("Authorization", "Basic \(basic)"),
                          ("User-Agent", "analytics-ios/1.5.11")])
            #expect(reply.status == 200)
            #expect(try await h.count("SELECT count(*) FROM events WHERE app = 'yoked'") == 2)
            #expect(try await h.count("SELECT count(*) FROM events WHERE type = 'screen' AND event = 'Welcome'") == 1)
        }
    }

    @Test func analyticsKotlinBatch() async throws {
        try await withServer { h in
            // Kotlin stamps millisecond UTC times and sends userId "" before login.
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
            let now = formatter.string(from: Date())
            let body = #"""
                {"batch":[{"properties":{"page":1},"event":"onboarding_screen_viewed","type":"track",
                 "messageId":"0f6a3a36-4bd1-4b8a-9d9f-1c1c3b0f0e11","anonymousId":"5b1d7c0e-8d33-4b6b-a1d0-2b5f1f6c9a77",
                 "integrations":{},"context":{"app":{"name":"Umuve","version":"1.4.0","namespace":"com.umuve","build":"40"},
                  "device":{"id":"abc","manufacturer":"Google","model":"Pixel 8","name":"shiba","type":"android"},
                  "os":{"name":"Android","version":"14"},"library":{"name":"analytics-kotlin","version":"1.16.3"},
                  "locale":"en-US","network":{"wifi":true},"screen":{"density":2.625,"height":2205,"width":1080},
                  "timezone":"America/New_York","userAgent":"Dalvik/2.1.0","instanceId":"i-1"},
                 "userId":"","timestamp":"\#(now)","channel":"mobile","_metadata":{"bundled":[],"unbundled":[],"bundledIds":[]}}],
                 "sentAt":"\#(now)","writeKey":"\#(h.key)"}
                """#
            let basic = Data((h.key + ":").utf8).base64EncodedString()
            let reply = try await h.send(
                .POST, "/v1/b", body: Array(body.utf8),
                headers: [("Content-Type", "application/json; charset=utf-8"), ("Authorization", "Basic \(basic)")])
            #expect(reply.status == 200)
            #expect(reply.json?["accepted"] as? Int == 1)
            #expect(try await h.count("SELECT count(*) FROM events WHERE user_id IS NULL AND context->'os'->>'name' = 'Android'") == 1)
        }
    }
}
