import Foundation
import Funnels
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// `onramp archive run|verify|restore` and the erasure's reach into the
/// archive (docs/lifecycle.md), against the log's own rows before archiving.
@Suite("onramp archive")
struct ArchiveCommandTests {
    /// January and February 2025, received long before any horizon the tests set.
    static let january: Int64 = 1_735_689_600_000_000
    static let day: Int64 = 86_400_000_000

    /// A database with two archived-to-be months of two apps (and today's
    /// events), a scratch directory and a configuration keeping two months.
    struct Setup {
        let db: TestDatabase
        let pool: ConnectionPool
        let scratch: URL
        let archive: String
        let config: String

        static func make(keep: String = "2 months") async throws -> Setup {
            let db = try await TestDatabase.create()
            let pool = db.pool(maxConnections: 2)
            let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("archive-\(UUID().uuidString)")
            let archive = scratch.appendingPathComponent("archive").path
            try FileManager.default.createDirectory(atPath: archive, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let config = scratch.appendingPathComponent("onramp.yaml").path
            try (Self.defaultFunnels() + "\narchive:\n  keep_events: \(keep)\n  directory: \(archive)\n")
                .write(toFile: config, atomically: true, encoding: .utf8)
            var events: [SeedEvent] = []
            for n in 0..<400 {
                let received = ArchiveCommandTests.january + Int64(n) * 3 * 3_600_000_000 + 7_000_000
                let app = n % 3 == 0 ? "ops" : "yoked"
                events.append(SeedEvent(
                    app: app, messageId: "m\(n)", event: n % 2 == 0 ? "started" : "phone_entered", anonymousId: "d\(n % 37)",
                    userId: n % 5 == 0 ? "u\(n % 11)" : nil, timestamp: received - 2_000_000,
                    properties: #"{"n": \#(n), "note": "said \"hi\",\nthen \\ left\t東京"}"#, receivedAt: received))
            }
            events += (0..<20).map { SeedEvent(app: "yoked", messageId: "now\($0)", event: "started", anonymousId: "d1", timestamp: Timestamps.microseconds(Date())) }
            let seeded = events
            try await pool.withConnection { c in
                try c.query("SELECT onramp_create_month_partition('2025-01-01'), onramp_create_month_partition('2025-02-01')")
                try EventSeeder.insert(c, seeded)
            }
            return Setup(db: db, pool: pool, scratch: scratch, archive: archive, config: config)
        }

        /// The bundled funnels, as the repository holds them: the archive section goes beside them.
        static func defaultFunnels() throws -> String {
            let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Sources/Funnels/Resources/default-funnels.yaml")
            return try String(contentsOf: path, encoding: .utf8)
        }

        /// The log's rows before `until`, each column's text as PostgreSQL gives it (times in UTC), by message id.
        func rows(before until: String) async throws -> [String: String] {
            try await pool.withConnection { c in
                try c.transaction { c in
                    try c.query("SET LOCAL timezone TO 'UTC'")
                    var rows: [String: String] = [:]
                    for row in try c.query(
                        """
                        SELECT seq::text, app, type, message_id, event, anonymous_id, user_id, "timestamp"::text, original_timestamp::text,
                               sent_at::text, received_at::text, properties::text, context::text, traits::text, previous_id, group_id
                        FROM events WHERE received_at < $1::timestamptz
                        """, [.text(until)]
                    ).rows {
                        var object: [String: Any] = [:]
                        for (index, column) in ArchiveCommandTests.columns.enumerated() {
                            object[column] = try row.decode(String?.self, at: index) ?? NSNull()
                        }
                        let (id, text) = try ArchiveCommandTests.canonical(object)
                        rows[id] = text
                    }
                    return rows
                }
            }
        }

        /// Every message in the month's archive files, by message id.
        func archived(_ month: String) throws -> [String: String] {
            let manifest = try ArchiveCommandTests.manifest(archive, month)
            var rows: [String: String] = [:]
            for file in manifest["files"] as? [[String: Any]] ?? [] {
                for object in try ArchiveCommandTests.messages("\(archive)/\(month)/\(file["path"] as? String ?? "")") {
                    let (id, text) = try ArchiveCommandTests.canonical(object)
                    rows[id] = text
                }
            }
            return rows
        }
    }

    static let columns = [
        "seq", "app", "type", "message_id", "event", "anonymous_id", "user_id", "timestamp", "original_timestamp", "sent_at",
        "received_at", "properties", "context", "traits", "previous_id", "group_id",
    ]

    /// An archive file's messages, read by gzip itself and split here as
    /// PostgreSQL's text format says: a header naming the columns, then a
    /// row per message, tab-separated, `\N` for NULL, backslash escapes.
    static func messages(_ path: String) throws -> [[String: Any]] {
        let lines = try gunzip(path).split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        guard let header = lines.first else { return [] }
        #expect(header.split(separator: "\t").map(String.init) == columns, "\(path): header \(header)")
        return lines.dropFirst().map { line in
            var object: [String: Any] = [:]
            for (column, field) in zip(columns, line.split(separator: "\t", omittingEmptySubsequences: false)) {
                object[column] = field == "\\N" ? NSNull() : unescape(String(field))
            }
            return object
        }
    }

    static func unescape(_ field: String) -> String {
        var out = "", escaped = false
        for character in field {
            if escaped {
                switch character {
                case "t": out.append("\t")
                case "n": out.append("\n")
                case "r": out.append("\r")
                default: out.append(character)
                }
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else {
                out.append(character)
            }
        }
        return out
    }

    static func manifest(_ archive: String, _ month: String) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(archive)/\(month)/manifest.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// The file's text, by the system's gzip: an independent reader of what was written.
    static func gunzip(_ path: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/gzip")
        process.arguments = ["-dc", path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "gzip -dc \(path)")
        return String(decoding: data, as: UTF8.self)
    }

    /// A message's id and its columns as JSON with sorted keys: rows compare as text.
    static func canonical(_ object: [String: Any]) throws -> (String, String) {
        let text = String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
        return (object["message_id"] as? String ?? "", text)
    }

    static func canonical(_ json: String, dropping: String) throws -> (String, String) {
        var object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        object.removeValue(forKey: dropping)
        return try canonical(object)
    }

    static func field(_ row: String, _ key: String) -> Any? {
        (try? JSONSerialization.jsonObject(with: Data(row.utf8)) as? [String: Any])?[key]
    }

    static func received(_ row: String) -> String { field(row, "received_at") as? String ?? "" }

    static func without(_ key: String, _ rows: [String: String]) throws -> [String: String] {
        try rows.mapValues { try canonical($0, dropping: key).1 }
    }

    @Test("A month archived holds every message as stored, by app and UTC day, 0600 files with a manifest and an id index; its partition goes; verify finds a damaged file; restore brings back exactly what was there, once")
    func archivesAndRestores() async throws {
        let setup = try await Setup.make()
        defer { try? FileManager.default.removeItem(at: setup.scratch) }
        let before = try await setup.rows(before: "2025-03-01")
        #expect(before.count == 400)

        let run = try OnrampBinary.run(["archive", "run", "--config", setup.config, "--database-url", setup.db.url])
        #expect(run.status == 0, "\(run.stderr)")
        let januaryCount = before.values.filter { Self.received($0).hasPrefix("2025-01") }.count
        #expect(run.stdout.contains("archived 2025-01: \(januaryCount) messages"), "\(run.stdout)")
        #expect(run.stdout.contains("archived 2025-02: \(400 - januaryCount) messages"), "\(run.stdout)")
        // Gone from the log, partitions and all; today's events stay.
        let left = try await setup.pool.query(
            """
            SELECT (SELECT count(*) FROM events WHERE received_at < '2025-03-01'), (SELECT count(*) FROM events),
                   onramp_month_partition('2025-01-01') IS NULL AND onramp_month_partition('2025-02-01') IS NULL,
                   (SELECT string_agg(month::text, ',' ORDER BY month) FROM archived_months)
            """).first
        #expect(try left?.decode(Int.self, at: 0) == 0)
        #expect(try left?.decode(Int.self, at: 1) == 20)
        #expect(try left?.decode(Bool.self, at: 2) == true)
        #expect(try left?.decode(String.self, at: 3) == "2025-01-01,2025-02-01")

        // The files hold the rows exactly (read by gzip itself), one file per app and day, 0600.
        let archived = try setup.archived("2025-01").merging(try setup.archived("2025-02")) { first, _ in first }
        #expect(archived == before)
        let manifest = try Self.manifest(setup.archive, "2025-01")
        let files = manifest["files"] as? [[String: Any]] ?? []
        let days = Set(before.values.compactMap { row -> String? in
            let received = Self.received(row)
            guard received.hasPrefix("2025-01"), let app = Self.field(row, "app") as? String else { return nil }
            return "\(app) \(received.prefix(10))"
        })
        #expect(Set(files.map { "\($0["app"] as? String ?? "") \($0["day"] as? String ?? "")" }) == days)
        for file in files {
            let path = "\(setup.archive)/2025-01/\(file["path"] as? String ?? "")"
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600, "\(path)")
            let lines = try Self.messages(path).count
            #expect(lines == file["messages"] as? Int)
        }
        // The index names a person's files by keyed hash, and no other file.
        let hash = try await setup.pool.query("SELECT encode(onramp_keyed_hash('yoked', 'id', 'u1'), 'hex')").scalar(String.self)
        for file in files where file["app"] as? String == "yoked" {
            let index = try String(contentsOfFile: "\(setup.archive)/2025-01/\(file["id_index"] as? String ?? "")", encoding: .utf8)
            let holds = try Self.messages("\(setup.archive)/2025-01/\(file["path"] as? String ?? "")").contains { $0["user_id"] as? String == "u1" }
            #expect(index.split(separator: "\n").contains(Substring(hash)) == holds)
        }

        let verified = try OnrampBinary.run(["archive", "verify", "--directory", setup.archive])
        #expect(verified.status == 0 && verified.stdout.contains("verified 2025-01: \(januaryCount) messages"), "\(verified.stdout)\(verified.stderr)")

        // A damaged file: verify names it, and a restore refuses the month and restores nothing.
        let victim = "\(setup.archive)/2025-01/\(files.first?["path"] as? String ?? "")"
        let original = try Data(contentsOf: URL(fileURLWithPath: victim))
        try original.prefix(original.count / 2).write(to: URL(fileURLWithPath: victim))
        let damaged = try OnrampBinary.run(["archive", "verify", "--directory", setup.archive, "--month", "2025-01"])
        #expect(damaged.status != 0 && damaged.stderr.contains(victim) && damaged.stderr.contains("does not verify"), "\(damaged.stderr)")
        let refused = try OnrampBinary.run(["archive", "restore", "--month", "2025-01", "--config", setup.config, "--database-url", setup.db.url])
        #expect(refused.status != 0 && refused.stderr.contains("does not verify"), "\(refused.stderr)")
        #expect(try await setup.pool.query("SELECT count(*) FROM events").scalar(Int.self) == 20)
        try original.write(to: URL(fileURLWithPath: victim))

        // Restored: the same messages, new seq; twice: nothing added.
        let restored = try OnrampBinary.run(["archive", "restore", "--month", "2025-01", "--config", setup.config, "--database-url", setup.db.url])
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(restored.stdout.contains("restored 2025-01: \(januaryCount) of \(januaryCount) archived messages appended, 0 already in the log"), "\(restored.stdout)")
        let back = try await setup.rows(before: "2025-02-01")
        let january = before.filter { Self.received($0.value).hasPrefix("2025-01") }
        #expect(try Self.without("seq", back) == Self.without("seq", january))
        let oldSeqs = Set(january.values.compactMap { Self.field($0, "seq") as? String })
        #expect(back.values.allSatisfy { !oldSeqs.contains(Self.field($0, "seq") as? String ?? "") })
        let again = try OnrampBinary.run(["archive", "restore", "--month", "2025-01", "--directory", setup.archive, "--database-url", setup.db.url])
        #expect(again.status == 0 && again.stdout.contains("0 of \(januaryCount) archived messages appended, \(januaryCount) already in the log"), "\(again.stdout)\(again.stderr)")
        #expect(try await setup.pool.query("SELECT count(*) FROM events").scalar(Int.self) == 20 + januaryCount)
        #expect(try await setup.pool.query("SELECT string_agg(month::text, ',') FROM archived_months").scalar(String.self) == "2025-02-01")
        // A restored month stays in the log: the next archive leaves it, until it is named.
        let kept = try OnrampBinary.run(["archive", "run", "--config", setup.config, "--database-url", setup.db.url])
        #expect(kept.status == 0 && !kept.stdout.contains("archived 2025-01"), "\(kept.stdout)\(kept.stderr)")
        let again2 = try OnrampBinary.run(["archive", "run", "--month", "2025-01", "--config", setup.config, "--database-url", setup.db.url])
        #expect(again2.status == 0 && again2.stdout.contains("archived 2025-01: \(januaryCount) messages"), "\(again2.stdout)\(again2.stderr)")
        // One app restored: archiving the month again would lose the other's, and is refused.
        let partial = try OnrampBinary.run(["archive", "restore", "--month", "2025-01", "--app", "ops", "--directory", setup.archive, "--database-url", setup.db.url])
        #expect(partial.status == 0, "\(partial.stderr)")
        let losing = try OnrampBinary.run(["archive", "run", "--month", "2025-01", "--config", setup.config, "--database-url", setup.db.url])
        #expect(losing.status != 0 && losing.stderr.contains("would lose the difference"), "\(losing.stderr)")
        #expect(try OnrampBinary.run(["archive", "verify", "--directory", setup.archive, "--month", "2025-01"]).status == 0)
        // Analysts see which months of their apps left and came back.
        let changes = try await setup.pool.query(
            "SELECT string_agg(app || ' ' || month || ' ' || change, ', ' ORDER BY at, app, change) FROM analytics.archive_changes"
        ).scalar(String.self)
        #expect(changes.contains("ops 2025-01-01 archived") && changes.contains("yoked 2025-01-01 restored"), "\(changes)")
    }

    @Test("Killed at random moments, archive and restore lose and duplicate nothing: rerun, every message is in the log or in a verified archive, once")
    func killedArchiveAndRestore() async throws {
        let setup = try await Setup.make()
        defer { try? FileManager.default.removeItem(at: setup.scratch) }
        let before = try await setup.rows(before: "2025-03-01")
        for (round, delay) in [5, 15, 30, 45, 60, 90, 120, 200].enumerated() {
            let restore = round % 2 == 1
            let arguments = restore
                ? ["archive", "restore", "--month", "2025-01", "--directory", setup.archive, "--database-url", setup.db.url]
                : ["archive", "run", "--config", setup.config, "--database-url", setup.db.url]
            let process = Process()
            process.executableURL = OnrampBinary.url
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            try await Task.sleep(for: .milliseconds(delay))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            // Whatever it reached: each message is in the log once, or in a month the archive holds whole.
            let inLog = try await setup.rows(before: "2025-03-01")
            let duplicates = try await setup.pool.query(
                "SELECT count(*) - count(DISTINCT (app, message_id)) FROM events").scalar(Int.self)
            #expect(duplicates == 0, "round \(round)")
            let months = try await setup.pool.query("SELECT coalesce(string_agg(to_char(month, 'YYYY-MM'), ','), '') FROM archived_months")
                .scalar(String.self).split(separator: ",").map(String.init)
            var held = inLog
            for month in months {
                let verify = try OnrampBinary.run(["archive", "verify", "--directory", setup.archive, "--month", month])
                #expect(verify.status == 0, "round \(round): \(verify.stderr)")
                held.merge(try setup.archived(month)) { first, _ in first }
            }
            #expect(Set(held.keys) == Set(before.keys), "round \(round)")
        }
        // Finished: archived whole, then restored whole, equal to what was there.
        let finish = try OnrampBinary.run(["archive", "run", "--config", setup.config, "--database-url", setup.db.url])
        #expect(finish.status == 0, "\(finish.stderr)")
        for month in ["2025-01", "2025-02"] {
            let restored = try OnrampBinary.run(["archive", "restore", "--month", month, "--directory", setup.archive, "--database-url", setup.db.url])
            #expect(restored.status == 0, "\(restored.stderr)")
        }
        #expect(try Self.without("seq", try await setup.rows(before: "2025-03-01")) == Self.without("seq", before))
    }

    @Test("An erased person leaves every archive file that held them, found by the index; the journal keeps the keyed hashes; a restore does not bring them back")
    func erasureReachesTheArchive() async throws {
        let setup = try await Setup.make()
        defer { try? FileManager.default.removeItem(at: setup.scratch) }
        // erased-user signs in on their device in January, and again today; a
        // tablet first used by keeper also sees them once: keeper's, it stays.
        let t = Self.january + 10 * Self.day
        let person = [
            SeedEvent(app: "yoked", messageId: "p1", event: "started", anonymousId: "erased-device", timestamp: t, receivedAt: t + 1_000_000),
            SeedEvent(app: "yoked", type: "identify", messageId: "p2", anonymousId: "erased-device", userId: "erased-user", timestamp: t + 60_000_000, receivedAt: t + 61_000_000),
            SeedEvent(app: "yoked", messageId: "p3", event: "phone_entered", anonymousId: "erased-device", userId: "erased-user", timestamp: t + 32 * Self.day, receivedAt: t + 32 * Self.day),
            SeedEvent(app: "yoked", messageId: "p4", event: "started", userId: "erased-user", timestamp: Timestamps.microseconds(Date())),
            SeedEvent(app: "yoked", type: "identify", messageId: "k1", anonymousId: "tablet", userId: "keeper", timestamp: t - Self.day, receivedAt: t - Self.day),
            SeedEvent(app: "yoked", messageId: "k2", event: "started", anonymousId: "tablet", userId: "erased-user", timestamp: t + 2 * Self.day, receivedAt: t + 2 * Self.day),
            SeedEvent(app: "yoked", messageId: "k3", event: "started", anonymousId: "tablet", timestamp: t + 3 * Self.day, receivedAt: t + 3 * Self.day),
        ]
        try await setup.pool.withConnection { c in try EventSeeder.insert(c, person) }
        let before = try await setup.rows(before: "2025-03-01")
        let run = try OnrampBinary.run(["archive", "run", "--config", setup.config, "--database-url", setup.db.url])
        #expect(run.status == 0, "\(run.stderr)")

        let erase = try OnrampBinary.run([
            "privacy", "erase", "--app", "yoked", "--user-id", "erased-user", "--requested-by", "ticket 1", "--config", setup.config,
            "--database-url", setup.db.url,
        ])
        #expect(erase.status == 0, "\(erase.stderr)")
        #expect(erase.stdout.contains("archive \(setup.archive): 4 message(s) erased from 3 file(s) of 2025-01, 2025-02"), "\(erase.stdout)")
        for month in ["2025-01", "2025-02"] {
            let held = try setup.archived(month)
            #expect(!held.values.contains { Self.field($0, "user_id") as? String == "erased-user" || Self.field($0, "anonymous_id") as? String == "erased-device" })
            // Everyone else is as they were, the tablet's own messages too.
            #expect(Set(held.keys) == Set(before.filter { Self.received($0.value).hasPrefix(month) }.keys).subtracting(["p1", "p2", "p3", "k2"]))
            let manifest = try Self.manifest(setup.archive, month)
            #expect(manifest["erasures"] as? [Int] == [1])
        }
        let verified = try OnrampBinary.run(["archive", "verify", "--directory", setup.archive])
        #expect(verified.status == 0, "\(verified.stderr)")
        // No file left behind that holds them, named or not.
        let all = FileManager.default.enumerator(atPath: setup.archive)?.allObjects.compactMap { $0 as? String } ?? []
        for path in all where path.hasSuffix(".gz") {
            #expect(!(try Self.gunzip("\(setup.archive)/\(path)")).contains("erased-"), "\(path)")
        }
        let journal = try String(contentsOfFile: "\(setup.archive)/erasures.journal", encoding: .utf8)
        let hash = try await setup.pool.query("SELECT encode(onramp_keyed_hash('yoked', 'id', 'erased-user'), 'hex')").scalar(String.self)
        #expect(journal.split(separator: "\n").count == 1 && journal.contains(hash) && !journal.contains("erased-"), "\(journal)")

        for month in ["2025-01", "2025-02"] {
            let restored = try OnrampBinary.run(["archive", "restore", "--month", month, "--directory", setup.archive, "--database-url", setup.db.url])
            #expect(restored.status == 0, "\(restored.stderr)")
        }
        #expect(try await setup.pool.query(
            "SELECT count(*) FROM events WHERE user_id = 'erased-user' OR anonymous_id = 'erased-device'").scalar(Int.self) == 0)
        #expect(try await setup.pool.query("SELECT count(*) FROM events WHERE received_at < '2025-03-01'").scalar(Int.self) == 402)
    }

    @Test("Bad input stops with the file, the field and what was expected; nothing is archived")
    func badInput() async throws {
        let setup = try await Setup.make()
        defer { try? FileManager.default.removeItem(at: setup.scratch) }
        let funnels = try Setup.defaultFunnels()
        func attempt(_ archive: String) throws -> OnrampBinary.Output {
            let path = setup.scratch.appendingPathComponent("bad.yaml").path
            try (funnels + "\n" + archive).write(toFile: path, atomically: true, encoding: .utf8)
            return try OnrampBinary.run(["archive", "run", "--config", path, "--database-url", setup.db.url])
        }
        let short = try attempt("archive:\n  keep_events: 10 days\n  directory: \(setup.archive)\n")
        #expect(short.status != 0 && short.stderr.contains("archive.keep_events") && short.stderr.contains("shorter than the longest funnel window plus retention's last day"), "\(short.stderr)")
        let weeks = try attempt("archive:\n  keep_events: 13 weeks\n  directory: \(setup.archive)\n")
        #expect(weeks.status != 0 && weeks.stderr.contains("expected a number of months or days"), "\(weeks.stderr)")
        let missing = try attempt("archive:\n  keep_events: 13 months\n  directory: \(setup.archive)/nowhere\n")
        #expect(missing.status != 0 && missing.stderr.contains("archive.directory") && missing.stderr.contains("does not exist"), "\(missing.stderr)")
        let none = try attempt("")
        #expect(none.status != 0 && none.stderr.contains("no archive: section"), "\(none.stderr)")
        let month = try OnrampBinary.run(["archive", "restore", "--month", "2025-13", "--directory", setup.archive, "--database-url", setup.db.url])
        #expect(month.status != 0 && month.stderr.contains("expected YYYY-MM"), "\(month.stderr)")
        let absent = try OnrampBinary.run(["archive", "restore", "--month", "2024-06", "--directory", setup.archive, "--database-url", setup.db.url])
        #expect(absent.status != 0 && absent.stderr.contains("2024-06/manifest.json"), "\(absent.stderr)")
        #expect(try await setup.pool.query("SELECT count(*) FROM events").scalar(Int.self) == 420)
    }
}

/// What the reports do with archived history (docs/funnels.md, "Archived
/// history"): frozen days kept as computed, kept days unchanged, a night and
/// a rebuild equal, a restore unfreezing them.
@Suite("archived history in the reports")
struct ArchivedHistoryTests {
    static let configuration = """
        apps:
          - name: yoked
        funnels:
          - name: signup
            app: yoked
            window: 1d
            steps:
              - event: started
              - event: phone_entered
              - event: verified
            retention: {days: [1, 7]}
        """

    /// Every projection table's md5, as scripts/lib/projection_md5.sql gives it.
    static func digests(_ pool: ConnectionPool) async throws -> [String: String] {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/lib/projection_md5.sql")
        let sql = try String(contentsOf: script, encoding: .utf8).split(separator: "\n").filter { !$0.hasPrefix("--") }.joined(separator: "\n")
        var digests: [String: String] = [:]
        for row in try await pool.query(sql).rows {
            digests[try row.decode(String.self, at: 0)] = try row.decode(String?.self, at: 1) ?? ""
        }
        // Where each run stopped reading: the transactions pending then, which other tests' databases on the cluster hold too.
        digests.removeValue(forKey: "projection_checkpoint")
        return digests
    }

    /// The rows of the frozen days, as text, table by table.
    static func frozenRows(_ pool: ConnectionPool, before: String) async throws -> [String] {
        var rows: [String] = []
        for table in ["funnel_persons", "funnel_daily", "funnel_cohorts", "funnel_tallies", "funnel_person_retention", "funnel_retention",
                      "funnel_person_diagnostics", "funnel_step_lingering"] {
            rows += try await pool.query(
                "SELECT '\(table) ' || (to_jsonb(t) - ARRAY['computed_at', 'updated_at'])::text FROM \(table) t WHERE cohort_day < $1::date ORDER BY 1",
                [.text(before)]
            ).rows.map { try $0.decode(String.self, at: 0) }
        }
        return rows
    }

    @Test("Archived months freeze their cohort days: a night and a rebuild keep them as computed and give identical tables, links stay whole, a new person counts, a changed funnel marks them; restored, they are computed again")
    func frozenDays() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 2)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("frozen-\(UUID().uuidString)")
        let archive = scratch.appendingPathComponent("archive").path
        try FileManager.default.createDirectory(atPath: archive, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: scratch) }
        let config = scratch.appendingPathComponent("onramp.yaml").path
        // The first night before any archive: without the section, the night archives nothing.
        try Self.configuration.write(toFile: config, atomically: true, encoding: .utf8)
        let hour: Int64 = 3_600_000_000, day = 24 * hour
        let jan5 = ArchiveCommandTests.january + 4 * day, jan20 = ArchiveCommandTests.january + 19 * day
        let feb10 = ArchiveCommandTests.january + 40 * day
        func at(_ t: Int64, _ id: String, _ event: String, device: String? = nil, user: String? = nil, type: String = "track") -> SeedEvent {
            SeedEvent(app: "yoked", type: type, messageId: "\(id)-\(event)-\(t)", event: type == "track" ? event : nil, anonymousId: device,
                      userId: user, timestamp: t, receivedAt: t + 1_000_000)
        }
        // A drops at step 2 on Jan 5; B starts on Jan 20; D signs in on a device on Feb 10; twenty others across both months.
        var old = [at(jan5, "a", "started", user: "A"), at(jan5 + hour, "a", "phone_entered", user: "A"), at(jan5 + 2 * day, "a", "visit", user: "A"),
                   at(jan20, "b", "started", user: "B"),
                   at(feb10, "d", "started", device: "dev-D"), at(feb10 + hour, "d", "identify", device: "dev-D", user: "D", type: "identify")]
        for n in 0..<20 {
            let t = ArchiveCommandTests.january + Int64(n) * 2 * day + 5 * hour
            old += [at(t, "p\(n)", "started", device: "p\(n)"), at(t + hour, "p\(n)", "phone_entered", device: "p\(n)")]
            if n % 3 == 0 { old.append(at(t + 2 * hour, "p\(n)", "verified", device: "p\(n)")) }
            if n % 2 == 0 { old.append(at(t + day + hour, "p\(n)", "visit", device: "p\(n)")) }
        }
        let seeded = old
        try await pool.withConnection { c in
            try c.query("SELECT onramp_create_month_partition('2025-01-01'), onramp_create_month_partition('2025-02-01')")
            try EventSeeder.insert(c, seeded)
        }
        func onramp(_ arguments: [String]) throws -> OnrampBinary.Output {
            let result = try OnrampBinary.run(arguments + ["--config", config, "--database-url", db.url])
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            return result
        }
        _ = try onramp(["report"])
        let before = try await Self.frozenRows(pool, before: "2025-03-03")
        #expect(before.contains { $0.hasPrefix("funnel_persons") && $0.contains(#""person_id": "A""#) })

        try (Self.configuration + "\narchive:\n  keep_events: 2 months\n  directory: \(archive)\n").write(toFile: config, atomically: true, encoding: .utf8)
        let archived = try onramp(["archive", "run"])
        #expect(archived.stdout.contains("archived 2025-01") && archived.stdout.contains("archived 2025-02"), "\(archived.stdout)")
        // Frozen: before the end of February plus the one-day window and a day.
        let now = Timestamps.microseconds(Date())
        let later = [
            at(now - 3 * hour, "a2", "verified", user: "A"),                                   // A again: their frozen row stays
            at(now - 3 * hour, "b2", "started", user: "B"), at(now - 2 * hour, "b2", "phone_entered", user: "B"),
            at(now - 3 * hour, "c", "started", user: "C"), at(now - 2 * hour, "c", "phone_entered", user: "C"),
            at(now - 2 * hour, "d2", "started", device: "dev-D"),                              // D's device: still D's
        ]
        try await pool.withConnection { c in try EventSeeder.insert(c, later) }
        let night = try onramp(["report", "--format", "json"])
        #expect(try await Self.frozenRows(pool, before: "2025-03-03") == before)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(night.stdout.utf8)) as? [String: Any])
        let report = try #require((json["funnels"] as? [[String: Any]])?.first)
        #expect((report["frozen"] as? [String: Any])?["before"] as? String == "2025-03-03", "\(report["frozen"] ?? "none")")
        // C counts on today's day; D's device is still D's, whose row is frozen (no row of its own).
        let persons = try await pool.query(
            "SELECT string_agg(person_id || ' ' || cohort_day, ',' ORDER BY person_id) FROM funnel_persons WHERE cohort_day >= '2025-03-03'"
        ).scalar(String.self)
        let today = String(Timestamps.format(microseconds: now - 3 * hour).prefix(10))
        #expect(persons == "C \(today)", "\(persons)")
        #expect(try await pool.query("SELECT user_id FROM identity_links WHERE anonymous_id = 'dev-D'").scalar(String.self) == "D")
        let incremental = try await Self.digests(pool)

        _ = try onramp(["rebuild"])
        let rebuilt = try await Self.digests(pool)
        for (table, digest) in incremental where rebuilt[table] != digest {
            Issue.record("\(table) differs between the night and the rebuild after archiving")
        }
        #expect(try await Self.frozenRows(pool, before: "2025-03-03") == before)

        // A changed funnel keeps its frozen days and says they were computed under its earlier definition.
        try (Self.configuration.replacingOccurrences(of: "window: 1d", with: "window: 2d")
             + "\narchive:\n  keep_events: 2 months\n  directory: \(archive)\n").write(toFile: config, atomically: true, encoding: .utf8)
        let changed = try onramp(["report"])
        #expect(changed.stdout.contains("cohort days before 2025-03-04 are frozen") && changed.stdout.contains("under the funnel's earlier definition"),
                "\(changed.stdout)")
        #expect(try await Self.frozenRows(pool, before: "2025-03-03") == before)
        try (Self.configuration + "\narchive:\n  keep_events: 2 months\n  directory: \(archive)\n").write(toFile: config, atomically: true, encoding: .utf8)

        // Restored, the days are computed again from the whole log: the night equals a rebuild.
        for month in ["2025-01", "2025-02"] { _ = try onramp(["archive", "restore", "--month", month]) }
        let restoredNight = try onramp(["report", "--format", "json"])
        let restoredJSON = try #require(try JSONSerialization.jsonObject(with: Data(restoredNight.stdout.utf8)) as? [String: Any])
        #expect((restoredJSON["funnels"] as? [[String: Any]])?.first?["frozen"] is NSNull)
        // The event catalogue counted the restored messages when they were first received, and not again.
        let counted = try await pool.query("SELECT (SELECT sum(events) FROM event_catalog_days)::int8, (SELECT count(*) FROM events)").rows.first
        #expect(try counted?.decode(Int.self, at: 0) == counted?.decode(Int.self, at: 1), "catalogue, log: \(String(describing: counted))")
        let afterRestore = try await Self.digests(pool)
        _ = try onramp(["rebuild"])
        let rebuiltAfterRestore = try await Self.digests(pool)
        for (table, digest) in afterRestore where rebuiltAfterRestore[table] != digest {
            Issue.record("\(table) differs between the night and the rebuild after restoring")
        }
        #expect(try await pool.query("SELECT count(*) FROM funnel_frozen_definitions").scalar(Int.self) == 0)
    }
}
