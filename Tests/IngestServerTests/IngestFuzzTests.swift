import AsyncHTTPClient
import EventLog
import Foundation
import IngestServer
import LibPQ
import NIOHTTP1
import Testing
import TestSupport

/// The ingestion fuzzer, through the storage path: generated and mutated bodies
/// posted to the real server on a real database. For every answer: never a 5xx;
/// a 200 accounts for every message (accepted + duplicates + rejected = messages,
/// and the app's `events` and `quarantine` rows grew by exactly accepted and
/// rejected); every message not rejected is readable back from `events`.
///
/// Bounded: `ONRAMP_FUZZ_SECONDS` (default 20) of posting by two workers, each
/// with its own app and write key so the row counts are exact. The seed is
/// `ONRAMP_FUZZ_SEED` (default fixed); a failing body is written under the temp
/// directory and named in the failure, so it replays.
@Suite struct IngestFuzzTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("fuzz/corpus")
    static let batchPaths = ["/v1/batch", "/v1/b"]
    static let singlePaths: [(String, MessageType)] = [
        ("/v1/track", .track), ("/v1/screen", .screen), ("/v1/identify", .identify), ("/v1/page", .page),
        ("/v1/group", .group), ("/v1/alias", .alias),
    ]

    struct Finding: Sendable, CustomStringConvertible {
        let problem: String
        let file: String
        var description: String { "\(problem) (body: \(file))" }
    }

    struct Tally: Sendable {
        var executions = 0
        var messages = 0
        var accepted = 0
        var duplicates = 0
        var rejected = 0
        var statuses: [Int: Int] = [:]
        var findings: [Finding] = []
    }

    @Test func generatedAndMutatedBodiesAreStoredOrRefusedNeverLost() async throws {
        let seconds = Double(ProcessInfo.processInfo.environment["ONRAMP_FUZZ_SECONDS"] ?? "") ?? 20
        let seed = UInt64(ProcessInfo.processInfo.environment["ONRAMP_FUZZ_SEED"] ?? "") ?? 0x1D_6E57
        let seeds = try Self.seedBodies()
        try await withServer(configure: { $0.rateLimitPerSecond = 1e9; $0.rateLimitBurst = 1e9 }) { h in
            let keys = WriteKeyStore(pool: h.pool)
            let workers = [try await keys.create(app: "fuzz-a"), try await keys.create(app: "fuzz-b")]
            let started = ContinuousClock.now
            let deadline = started + .milliseconds(Int64(seconds * 1000))
            let tallies = try await withThrowingTaskGroup(of: Tally.self) { group in
                for (w, key) in workers.enumerated() {
                    group.addTask {
                        var rng = SplitMix(seed: seed &+ UInt64(w))
                        var tally = Tally()
                        let app = w == 0 ? "fuzz-a" : "fuzz-b"
                        while ContinuousClock.now < deadline, tally.findings.count < 5 {
                            let (path, body) = Self.nextBody(seeds: seeds, rng: &rng)
                            try await Self.post(body, to: path, app: app, key: key, h: h, tally: &tally)
                        }
                        return tally
                    }
                }
                return try await group.reduce(into: [Tally]()) { $0.append($1) }
            }
            let elapsed = ContinuousClock.now - started
            var total = Tally()
            for t in tallies {
                total.executions += t.executions
                total.messages += t.messages
                total.accepted += t.accepted
                total.duplicates += t.duplicates
                total.rejected += t.rejected
                total.statuses.merge(t.statuses, uniquingKeysWith: +)
                total.findings += t.findings
            }
            let statuses = total.statuses.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
            print(
                "ingest fuzz: \(total.executions) executions in \(elapsed), seed \(seed); \(total.messages) messages in 200s "
                    + "(\(total.accepted) accepted, \(total.duplicates) duplicates, \(total.rejected) rejected); "
                    + "statuses \(statuses); \(total.findings.count) findings")
            for finding in total.findings { Issue.record("\(finding)") }
            #expect(total.executions > 0)
            #expect(total.accepted > 0 && total.rejected > 0, "the generator should reach both outcomes")
            #expect(try await h.send(.GET, "/healthz").status == 200)
        }
    }

    // MARK: - Posting and checking

    static func post(_ body: [UInt8], to path: String, app: String, key: String, h: Harness, tally: inout Tally) async throws {
        /// The app's stored events and quarantined messages, in one round trip.
        func counts() async throws -> (events: Int, quarantine: Int) {
            let row = try await h.pool.query(
                "SELECT (SELECT count(*) FROM events WHERE app = $1), (SELECT count(*) FROM quarantine WHERE app = $1)",
                [.text(app)]
            ).rows.first
            return (try row?.decode(Int.self, at: 0) ?? -1, try row?.decode(Int.self, at: 1) ?? -1)
        }
        let before = try await counts()
        let basic = Data((key + ":").utf8).base64EncodedString()
        let reply = try await h.send(
            .POST, path, body: body, headers: [("Content-Type", "application/json"), ("Authorization", "Basic \(basic)")])
        tally.executions += 1
        tally.statuses[reply.status, default: 0] += 1
        var problems: [String] = []
        if reply.status >= 500 { problems.append("\(reply.status): \(reply.body)") }
        if reply.status == 200 {
            let messages = expectedMessages(body, path: path)
            let json = reply.json ?? [:]
            let accepted = json["accepted"] as? Int ?? -1
            let duplicates = json["duplicates"] as? Int ?? -1
            let rejected = json["rejected"] as? [[String: Any]] ?? []
            let rejectedIndices = Set(rejected.compactMap { $0["index"] as? Int })
            tally.messages += messages.count
            tally.accepted += max(0, accepted)
            tally.duplicates += max(0, duplicates)
            tally.rejected += rejected.count
            if accepted + duplicates + rejected.count != messages.count {
                problems.append("accounting: \(accepted) + \(duplicates) + \(rejected.count) ≠ \(messages.count) messages")
            }
            if rejectedIndices.count != rejected.count || rejectedIndices.contains(where: { $0 < 0 || $0 >= messages.count }) {
                problems.append("rejected indices \(rejectedIndices.sorted()) for \(messages.count) messages")
            }
            let after = try await counts()
            let eventsGrew = after.events - before.events
            let quarantineGrew = after.quarantine - before.quarantine
            if eventsGrew != accepted { problems.append("events grew by \(eventsGrew), \(accepted) accepted") }
            if quarantineGrew != rejected.count { problems.append("quarantine grew by \(quarantineGrew), \(rejected.count) rejected") }
            // Every message not rejected is in the log under the id the server gives it, and reads back whole.
            let ids = messages.enumerated().filter { !rejectedIndices.contains($0.offset) }.compactMap { storedID($0.element) }
            if !ids.isEmpty {
                let rows = try await h.pool.query(
                    """
                    SELECT message_id, type, event, anonymous_id, user_id, "timestamp", properties::text, context::text, traits::text
                    FROM events WHERE app = $1 AND message_id = ANY($2)
                    """, [.text(app), .textArray(ids)])
                let found = Set(try rows.rows.map { try $0.decode(String.self, at: 0) })
                let missing = Set(ids).subtracting(found)
                if !missing.isEmpty { problems.append("not readable back: \(missing.prefix(3).map { $0.debugDescription })") }
            }
        }
        if !problems.isEmpty {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("onramp-ingest-fuzz-\(UUID().uuidString).json")
            try? Data(body).write(to: file)
            tally.findings.append(Finding(problem: "POST \(path): " + problems.joined(separator: "; "), file: file.path))
        }
    }

    /// The messages the server saw in a body it answered 200: the batch's
    /// elements, or the one object of a single-message path with its type set.
    static func expectedMessages(_ body: [UInt8], path: String) -> [JSONValue] {
        guard case .object(var root)? = try? JSONParser.parse(Data(body)) else { return [] }
        if let type = singlePaths.first(where: { $0.0 == path })?.1 {
            root["type"] = .string(type.rawValue)
            root["writeKey"] = nil
            return [.object(root)]
        }
        if case .array(let items)? = root["batch"] { return items }
        return []
    }

    /// The id a stored message has: its own `messageId`, or the one derived from its content.
    static func storedID(_ message: JSONValue) -> String? {
        guard case .object(let fields) = message else { return nil }
        if let id = fields["messageId"], !id.isNull { return id.stringValue }
        return MessageValidator.deterministicID(fields)
    }

    // MARK: - Bodies

    /// Hand-written seeds plus the decoder fuzzer's corpus (real batches, edge cases, what libFuzzer kept).
    static func seedBodies() throws -> [[UInt8]] {
        var seeds: [[UInt8]] = [
            Array(Fixtures.batch([Fixtures.track("s1"), Fixtures.track("s2", event: "welcome_viewed", anonymousId: "d2")]).utf8),
            Array(#"{"batch":[{"type":"screen","name":"welcome","anonymousId":"a","properties":{"flow":"employee","n":[1,2.5,null,true]}}],"context":{"app":{"version":"1"}}}"#.utf8),
            Array(#"{"batch":[{"type":"identify","userId":"u","anonymousId":"a","traits":{"email":"e","name":"N"}}]}"#.utf8),
            Array(#"{"type":"track","event":"otp_verified","anonymousId":"a","properties":{"attempt":2}}"#.utf8),
            Array(String(repeating: "[", count: 100_000).utf8),
            Array(#"{"batch":[\#(String(repeating: "{\"a\":", count: 400))1\#(String(repeating: "}", count: 400))]}"#.utf8),
        ]
        let files = (try? FileManager.default.contentsOfDirectory(at: corpus, includingPropertiesForKeys: nil)) ?? []
        for file in files.sorted(by: { $0.lastPathComponent < $1.lastPathComponent }) {
            if let data = try? Data(contentsOf: file), data.count <= 64 << 10 { seeds.append(Array(data)) }
        }
        return seeds
    }

    /// Values PostgreSQL, the validator or a JSON reader may trip on.
    static let hostileStrings: [String] = [
        "\u{0}", "a\u{0}b", "\u{1}\u{7}\u{1F}", "", " ", "\u{7F}", "\u{FEFF}", "\u{FFFF}", "\u{10FFFF}", "\u{2028}",
        "a" + String(repeating: "\u{301}", count: 1_500), String(repeating: "ü", count: 600), String(repeating: "x", count: 3_000),
        "\\u0000", "\\", "\"", "'); DROP TABLE events; --", "2026-11-21T10:00:00Z", "9999-12-31T23:59:59Z", "1970-01-01T00:00:00Z",
        "0000-01-01T00:00:00Z", "👩‍👩‍👧‍👦", "null",
    ]

    static func hostileValue(_ rng: inout SplitMix) -> JSONValue {
        switch rng.next() % 10 {
        case 0: .int(Int64(bitPattern: rng.next()))
        case 1: .double([1e308, -1e-308, 0.1, -0.0, .leastNonzeroMagnitude][Int(rng.next() % 5)])
        case 2: .null
        case 3: .bool(rng.next() % 2 == 0)
        case 4: .array((0..<Int(rng.next() % 4)).map { _ in .string(hostileStrings[Int(rng.next() % UInt64(hostileStrings.count))]) })
        case 5: .object([hostileStrings[Int(rng.next() % UInt64(hostileStrings.count))]: .int(1)])
        case 6:
            (0..<Int(40 + rng.next() % 200)).reduce(JSONValue.int(1)) { inner, _ in .array([inner]) }
        default: .string(hostileStrings[Int(rng.next() % UInt64(hostileStrings.count))])
        }
    }

    static let fields = [
        "type", "event", "name", "messageId", "anonymousId", "userId", "timestamp", "sentAt", "properties", "context", "traits",
        "writeKey", "originalTimestamp",
    ]

    /// A message of a random type with some of its fields hostile.
    static func generatedMessage(_ rng: inout SplitMix, index: Int) -> JSONValue {
        let types = MessageType.allCases
        var fields: [String: JSONValue] = [
            "type": .string(types[Int(rng.next() % UInt64(types.count))].rawValue),
            "event": .string(["welcome_viewed", "otp_verified", "otp_failed"][Int(rng.next() % 3)]),
            "name": .string("welcome"), "anonymousId": .string("device-\(rng.next() % 50)"),
            "messageId": .string("gen-\(rng.next() % 5_000)"),
            "timestamp": .string(Fixtures.iso(Date(timeIntervalSinceNow: -Double(rng.next() % 86_400)))),
            "properties": .object(["step": .int(Int64(index))]), "context": .object(["os": .object(["name": .string("Android")])]),
        ]
        if rng.next() % 3 == 0 { fields["messageId"] = nil }
        for _ in 0..<Int(rng.next() % 3) {
            let field = Self.fields[Int(rng.next() % UInt64(Self.fields.count))]
            let value = hostileValue(&rng)
            if rng.next() % 2 == 0, case .object(var inner)? = fields[field] {
                inner[hostileStrings[Int(rng.next() % UInt64(hostileStrings.count))]] = value
                fields[field] = .object(inner)
            } else {
                fields[field] = value
            }
        }
        return .object(fields)
    }

    /// Replaces one value somewhere in `value` with a hostile one.
    static func mutate(_ value: JSONValue, _ rng: inout SplitMix, depth: Int = 0) -> JSONValue {
        switch value {
        case .array(var items) where !items.isEmpty && depth < 8:
            let i = Int(rng.next() % UInt64(items.count))
            items[i] = mutate(items[i], &rng, depth: depth + 1)
            return .array(items)
        case .object(var fields) where !fields.isEmpty && depth < 8:
            let keys = fields.keys.sorted()
            let key = keys[Int(rng.next() % UInt64(keys.count))]
            if rng.next() % 4 == 0 {
                fields[key] = nil
                fields[hostileStrings[Int(rng.next() % UInt64(hostileStrings.count))]] = value[key]
            } else {
                fields[key] = mutate(fields[key] ?? .null, &rng, depth: depth + 1)
            }
            return .object(fields)
        default:
            return rng.next() % 4 == 0 ? value : hostileValue(&rng)
        }
    }

    static func nextBody(seeds: [[UInt8]], rng: inout SplitMix) -> (String, [UInt8]) {
        let single = singlePaths[Int(rng.next() % UInt64(singlePaths.count))].0
        let batch = batchPaths[Int(rng.next() % UInt64(batchPaths.count))]
        switch rng.next() % 5 {
        case 0, 1:  // a generated batch, with a duplicate now and then
            var messages = (0..<Int(1 + rng.next() % 12)).map { generatedMessage(&rng, index: $0) }
            if rng.next() % 4 == 0, let first = messages.first { messages.append(first) }
            var root: [String: JSONValue] = ["batch": .array(messages)]
            if rng.next() % 5 == 0 { root["context"] = .object(["app": hostileValue(&rng)]) }
            if rng.next() % 5 == 0 { root["sentAt"] = hostileValue(&rng) }
            return (batch, Array(JSONValue.object(root).canonicalText.utf8))
        case 2:  // a generated single message
            return (single, Array(generatedMessage(&rng, index: 0).canonicalText.utf8))
        case 3:  // a seed, parsed and mutated as JSON
            let bytes = seeds[Int(rng.next() % UInt64(seeds.count))]
            guard let parsed = try? JSONParser.parse(Data(bytes)) else { return (batch, bytes) }
            var mutated = parsed
            for _ in 0..<Int(1 + rng.next() % 3) { mutated = mutate(mutated, &rng) }
            let isBatch = mutated["batch"] != nil
            return (isBatch ? batch : single, Array(mutated.canonicalText.utf8))
        default:  // a seed, mutated as bytes
            var bytes = seeds[Int(rng.next() % UInt64(seeds.count))]
            if bytes.isEmpty { bytes = Array("{}".utf8) }
            switch rng.next() % 4 {
            case 0:
                for _ in 0..<(1 + rng.next() % 4) { bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next()) }
            case 1:
                let fragments = ["\"\\u0000\"", "\\u0000", "null", "[]", "{}", "1e309", "\"\\ud800\"", "-0", "\u{7}"]
                let at = Int(rng.next() % UInt64(bytes.count))
                bytes.insert(contentsOf: Array(fragments[Int(rng.next() % UInt64(fragments.count))].utf8), at: at)
            case 2:
                bytes = Array(bytes.prefix(Int(rng.next() % UInt64(bytes.count))))
            default:
                bytes = (0..<(rng.next() % 200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            return (rng.next() % 2 == 0 ? batch : single, bytes)
        }
    }
}
