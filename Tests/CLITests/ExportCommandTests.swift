import Foundation
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// `onramp export` (docs/lifecycle.md): an app's messages as the server
/// stored them, against the rows themselves; only by a login that reads the app.
@Suite("onramp export")
struct ExportCommandTests {
    @Test("JSON lines and CSV hold every message of the app as stored, tricky text intact, by the day received; a file appears whole, 0600; an app not granted is refused")
    func exports() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let t = Timestamps.microseconds(Date()) - 3_600_000_000
        var events = (0..<250).map { n in
            SeedEvent(app: "yoked", messageId: "y\(n)", event: n % 2 == 0 ? "started" : "phone_entered", anonymousId: "d\(n % 40)", timestamp: t + Int64(n))
        }
        // Quotes, commas, a newline, a backslash, a tab and a non-Latin name in what was sent.
        events.append(SeedEvent(
            app: "yoked", messageId: "tricky", event: "said \"hi\", then left", anonymousId: "d1", timestamp: t,
            properties: #"{"note": "line one\nline \\two\t\"quoted\"", "name": "Zoë 東京"}"#))
        events += (0..<30).map { SeedEvent(app: "ops", messageId: "o\($0)", event: "x", anonymousId: "e", timestamp: t) }
        let seeded = events
        try await pool.withConnection { c in try EventSeeder.insert(c, seeded) }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("export-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }

        // JSON lines, to a file: every message of the app, each object as analytics.events has it.
        let file = scratch.appendingPathComponent("yoked.jsonl")
        let jsonl = try OnrampBinary.run(["export", "--app", "yoked", "--out", file.path, "--database-url", db.url])
        #expect(jsonl.status == 0, "\(jsonl.stderr)")
        #expect(jsonl.stderr.contains("exported 251 messages of app yoked"), "\(jsonl.stderr)")
        let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        let objects = try lines.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        #expect(objects.count == 251)
        #expect(Set(objects.compactMap { $0["message_id"] as? String }) == Set(seeded.filter { $0.app == "yoked" }.map(\.messageId)))
        let stored = try await pool.query(
            "SELECT row_to_json(e)::text FROM analytics.events e WHERE message_id = 'tricky'").scalar(String.self)
        // Every object is the row as row_to_json writes it.
        let all = try await pool.query("SELECT row_to_json(e)::text FROM analytics.events e WHERE app = 'yoked'").rows
        let written = Dictionary(objects.map { ($0["message_id"] as? String ?? "", NSDictionary(dictionary: $0)) }) { first, _ in first }
        for row in all {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(try row.decode(String.self, at: 0).utf8)) as? [String: Any])
            #expect(written[object["message_id"] as? String ?? ""]?.isEqual(to: object) == true, "\(object)")
        }
        #expect(all.count == objects.count)
        let tricky = try #require(objects.first { $0["message_id"] as? String == "tricky" })
        let expected = try #require(try JSONSerialization.jsonObject(with: Data(stored.utf8)) as? [String: Any])
        #expect(NSDictionary(dictionary: tricky).isEqual(to: expected), "\(tricky) vs \(expected)")
        #expect((tricky["properties"] as? [String: Any])?["note"] as? String == "line one\nline \\two\t\"quoted\"")
        #expect(Set(tricky.keys).isSuperset(of: ["message_id", "timestamp", "received_at", "properties", "context", "user_id", "anonymous_id"]))
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(!FileManager.default.fileExists(atPath: file.path + ".partial"))

        // CSV on standard output, within today's days: a header, then the same rows, quoted where they must be.
        let today = String(Timestamps.format(microseconds: Timestamps.microseconds(Date())).prefix(10))
        let csv = try OnrampBinary.run(["export", "--app", "yoked", "--format", "csv", "--from", today, "--to", today, "--quiet", "--database-url", db.url])
        #expect(csv.status == 0, "\(csv.stderr)")
        // JSON text escapes a newline: a record is a line.
        let rows = csv.stdout.split(separator: "\n").map { CSVLine.fields(String($0)) }
        #expect(rows.first?.prefix(4) == ["seq", "app", "type", "message_id"])
        #expect(rows.count == 252)
        let header = try #require(rows.first)
        let trickyRow = try #require(rows.first { $0.count > 3 && $0[3] == "tricky" })
        #expect(trickyRow[header.firstIndex(of: "event") ?? 0] == "said \"hi\", then left")
        // Byte for byte what PostgreSQL's own CSV output gives for the same rows.
        var own: [UInt8] = []
        _ = try Connection.connect(db.url).copyOutCounting(
            """
            COPY (SELECT e.* FROM analytics.events e
                  WHERE e.app = 'yoked' AND e.received_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
                  ORDER BY e.received_at, e.seq) TO STDOUT (FORMAT csv, HEADER)
            """
        ) { own.append(contentsOf: $0) }
        #expect(csv.stdout == String(decoding: own, as: UTF8.self))
        // Days before today hold nothing.
        let yesterday = String(Timestamps.format(microseconds: Timestamps.microseconds(Date()) - 86_400_000_000).prefix(10))
        let none = try OnrampBinary.run(["export", "--app", "yoked", "--to", yesterday, "--database-url", db.url])
        #expect(none.status == 0 && none.stdout.isEmpty && none.stderr.contains("exported 0 messages"), "\(none.stderr)")

        // A login granted ops alone: ops is exported, yoked refused as an app it cannot read, and no file is left.
        let login = "\(db.name)_exporter"
        let password = scratch.appendingPathComponent("password")
        try "pw\n".write(to: password, atomically: true, encoding: .utf8)
        let made = try OnrampBinary.run(["access", "create-login", login, "--app", "ops", "--password-file", password.path, "--database-url", db.url])
        #expect(made.status == 0, "\(made.stderr)")
        let asLogin = try db.url(as: login)
        let ops = try OnrampBinary.run(["export", "--app", "ops", "--quiet", "--database-url", asLogin])
        #expect(ops.status == 0 && ops.stdout.split(separator: "\n").count == 30, "\(ops.stderr)")
        let hidden = scratch.appendingPathComponent("hidden.jsonl")
        let refused = try OnrampBinary.run(["export", "--app", "yoked", "--out", hidden.path, "--database-url", asLogin])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("no event of app 'yoked' that this login may read"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: hidden.path) && !FileManager.default.fileExists(atPath: hidden.path + ".partial"))
        let bad = try OnrampBinary.run(["export", "--app", "yoked", "--from", "2026-13-01", "--database-url", db.url])
        #expect(bad.status != 0 && bad.stderr.contains("--from must be a day such as 2026-11-01 (got '2026-13-01')"), "\(bad.stderr)")

        await pool.close()
        try await db.drop()
        _ = try await ConnectionPool.using(url: db.adminURL) { admin in try await admin.query("DROP ROLE \"\(login)\"") }
    }
}
