import Foundation
import LibPQ
import LocalPostgres
import Migrations
import TestSupport
import Testing

/// `onramp migrate` as a user runs it: the real binary, a real database.
@Suite("onramp migrate")
struct MigrateCommandTests {
    @Test("migrate applies every file, and a second run is a no-op")
    func twiceIsNoOp() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let first = try OnrampBinary.run(["migrate", "--database-url", db.url])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("applied 001_event_log.sql"))
        let pool = db.pool(maxConnections: 1)
        let recorded = try await pool.query("SELECT count(*) FROM onramp_schema_migrations").scalar(Int.self)
        let files = try MigrationFile.load(from: try TestDatabase.migrationsDirectory)
        #expect(recorded == files.count)
        let stamp = try await pool.query("SELECT max(applied_at)::text FROM onramp_schema_migrations").scalar(String.self)

        let second = try OnrampBinary.run(["migrate"], environment: ["DATABASE_URL": db.url])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("schema is current"))
        #expect(!second.stderr.contains("applied 0"))
        #expect(try await pool.query("SELECT count(*) FROM onramp_schema_migrations").scalar(Int.self) == recorded)
        #expect(try await pool.query("SELECT max(applied_at)::text FROM onramp_schema_migrations").scalar(String.self) == stamp)
        await pool.close()
        try await db.drop()
    }

    @Test("migrate --citus on a database without Citus is refused, saying what to do, and nothing runs")
    func citusWithoutTheExtension() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let result = try OnrampBinary.run(["migrate", "--citus", "--database-url", db.url])
        #expect(result.status != 0)
        #expect(result.stderr.contains("no citus extension"), "\(result.stderr)")
        #expect(result.stderr.contains("CREATE EXTENSION citus"), "\(result.stderr)")
        let pool = db.pool(maxConnections: 1)
        #expect(try await pool.query("SELECT to_regclass('events') IS NULL").scalar(Bool.self))
        await pool.close()
        try await db.drop()
    }

    @Test("a changed applied migration is refused with a message naming the file, and nothing runs")
    func changedMigrationRefused() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("migr-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        for file in try MigrationFile.load(from: try TestDatabase.migrationsDirectory) {
            try file.sql.write(to: dir.appendingPathComponent(file.fileName), atomically: true, encoding: .utf8)
        }
        #expect(try OnrampBinary.run(["migrate", "--database-url", db.url, "--migrations", dir.path]).status == 0)

        let target = dir.appendingPathComponent("001_event_log.sql")
        try (try String(contentsOf: target, encoding: .utf8) + "\n-- edited after the fact\n")
            .write(to: target, atomically: true, encoding: .utf8)
        try "CREATE TABLE should_not_exist (x int);".write(
            to: dir.appendingPathComponent("900_later.sql"), atomically: true, encoding: .utf8)
        let refused = try OnrampBinary.run(["migrate", "--database-url", db.url, "--migrations", dir.path])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("migration 001_event_log.sql was changed after it was applied"))
        let pool = db.pool(maxConnections: 1)
        #expect(try await pool.query("SELECT to_regclass('should_not_exist') IS NULL").scalar(Bool.self))
        await pool.close()
        try await db.drop()
    }

    @Test("a database migrated before comments of 002, 008, 009 and 010 were reworded migrates on, its records brought forward")
    func rewordedCommentsAccepted() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("migr-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        // The files as they were applied: their comments as they read then,
        // byte for byte (base64: they named a document the repository does not hold).
        func then(_ base64: String) -> String { String(decoding: Data(base64Encoded: base64) ?? Data(), as: UTF8.self) }
        let earlier = [
            "002_projection.sql": (#"(docs/funnels.md, "Persons")"#, then("KFNQRUMgwqc0IGlkZW50aXR5IG1lcmdlKQ==")),
            "008_drop_off_diagnostics.sql": (#"(docs/funnels.md, "Why they drop off")"#, then("KFNQRUMgwqcxMCk=")),
            "009_funnel_regressions.sql": (#"(docs/funnels.md, "Regressions and alerts")"#, then("KFNQRUMgwqcxMSk=")),
            "010_retention.sql": (#"(docs/funnels.md, "Retention")"#, then("KFNQRUMgwqcxMik=")),
        ]
        let files = try MigrationFile.load(from: try TestDatabase.migrationsDirectory)
        for file in files {
            var sql = file.sql
            if let (now, then) = earlier[file.fileName] {
                #expect(sql.contains(now))
                sql = sql.replacingOccurrences(of: now, with: then)
            }
            try sql.write(to: dir.appendingPathComponent(file.fileName), atomically: true, encoding: .utf8)
        }
        #expect(try OnrampBinary.run(["migrate", "--database-url", db.url, "--migrations", dir.path]).status == 0)

        let current = try OnrampBinary.run(["migrate", "--database-url", db.url])
        #expect(current.status == 0, "\(current.stderr)")
        #expect(current.stderr.contains("schema is current"))
        let pool = db.pool(maxConnections: 1)
        for file in files where earlier[file.fileName] != nil {
            let forward = try await pool.query(
                "SELECT checksum = encode(sha256(convert_to($2, 'UTF8')), 'hex') FROM onramp_schema_migrations WHERE version = $1",
                [.int(Int64(file.version)), .text(file.sql)]
            ).scalar(Bool.self)
            #expect(forward, "\(file.fileName): the record is the file's as it is now")
        }
        await pool.close()
        // Any other change to those files is still refused.
        for file in files { try file.sql.write(to: dir.appendingPathComponent(file.fileName), atomically: true, encoding: .utf8) }
        #expect(try OnrampBinary.run(["migrate", "--database-url", db.url, "--migrations", dir.path]).status == 0)
        let target = dir.appendingPathComponent("008_drop_off_diagnostics.sql")
        try (try String(contentsOf: target, encoding: .utf8) + "\n-- edited after the fact\n").write(to: target, atomically: true, encoding: .utf8)
        let refused = try OnrampBinary.run(["migrate", "--database-url", db.url, "--migrations", dir.path])
        #expect(refused.status != 0 && refused.stderr.contains("migration 008_drop_off_diagnostics.sql was changed after it was applied"))
        try await db.drop()
    }

    /// Roles are cluster-wide: databases of one cluster migrating at once
    /// race on them ("tuple concurrently updated"), which the per-database
    /// lock cannot prevent. Every one of them must still end migrated.
    @Test("several databases of one cluster migrating at once all succeed")
    func concurrentMigrationsOfOneCluster() async throws {
        var databases: [TestDatabase] = []
        for _ in 0..<6 { databases.append(try await TestDatabase.create(migrated: false)) }
        let migrator = try Migrator(directory: try TestDatabase.migrationsDirectory)
        let urls = databases.map(\.url)
        // One thread each, all at once: the cooperative pool would run only a core's worth.
        let outcomes = Outcomes()
        let group = DispatchGroup()
        for url in urls {
            group.enter()
            Thread {
                defer { group.leave() }
                do {
                    outcomes.add("applied \(try migrator.migrate(try Connection.connect(url)).applied.count)")
                } catch {
                    outcomes.add("\(error)")
                }
            }.start()
        }
        await withCheckedContinuation { done in group.notify(queue: .global()) { done.resume() } }
        #expect(outcomes.all == Array(repeating: "applied \(migrator.files.count)", count: urls.count))
        for database in databases { try await database.drop() }
    }

    /// What each migrating thread saw.
    final class Outcomes: @unchecked Sendable {  // every access holds `lock`
        private let lock = NSLock()
        private var values: [String] = []

        func add(_ value: String) {
            lock.lock()
            values.append(value)
            lock.unlock()
        }

        var all: [String] {
            lock.lock()
            defer { lock.unlock() }
            return values
        }
    }

    @Test("without a database URL the command says how to give one")
    func missingURL() throws {
        let result = try OnrampBinary.run(["migrate"], environment: ["DATABASE_URL": ""])
        #expect(result.status != 0)
        #expect(result.stderr.contains("--database-url"))
    }
}
