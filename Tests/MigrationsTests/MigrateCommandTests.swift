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

    @Test("without a database URL the command says how to give one")
    func missingURL() throws {
        let result = try OnrampBinary.run(["migrate"], environment: ["DATABASE_URL": ""])
        #expect(result.status != 0)
        #expect(result.stderr.contains("--database-url"))
    }
}
