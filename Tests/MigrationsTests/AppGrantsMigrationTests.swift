import Foundation
import LibPQ
import LocalPostgres
import Migrations
import TestSupport
import Testing

/// Migration 026 (per-app access, docs/access.md) on a database that has
/// analysts already: nothing changes for them; a login made later reads only
/// what it is granted.
@Suite("the per-app grants migration")
struct AppGrantsMigrationTests {
    @Test("the every-app roles and the logins then their members keep every app; a login made after holds none")
    func upgradeWithoutSurprise() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let files = try MigrationFile.load(from: try TestDatabase.migrationsDirectory)
        let pool = db.pool(maxConnections: 1)
        _ = try await pool.withConnection { c in try Migrator(files: files.filter { $0.version < 26 }).migrate(c) }
        let (before, after, outsider) = ("\(db.name)_before", "\(db.name)_after", "\(db.name)_outsider")
        let t = Timestamps.microseconds(Date())
        try await pool.withConnection { c in
            try EventSeeder.insert(c, [
                SeedEvent(app: "yoked", event: "a", anonymousId: "d1", timestamp: t), SeedEvent(app: "ops", event: "a", anonymousId: "d2", timestamp: t),
            ])
            try c.query("CREATE ROLE \(before) LOGIN IN ROLE onramp_analyst")
            try c.query("CREATE ROLE \(outsider) LOGIN")
        }
        _ = try await pool.withConnection { c in try Migrator(files: files).migrate(c) }
        _ = try await pool.withConnection { c in try c.query("CREATE ROLE \(after) LOGIN IN ROLE onramp_analyst") }
        let grants = try await pool.query(
            "SELECT r.rolname::text FROM app_grants g JOIN pg_roles r ON r.oid = g.login WHERE g.app IS NULL ORDER BY 1"
        ).rows.compactMap { $0.text(at: 0) }
        #expect(Set(grants).isSuperset(of: ["onramp_analyst", "onramp_operator", before]))
        #expect(!grants.contains(after) && !grants.contains(outsider))
        func apps(_ login: String) async throws -> String {
            try await ConnectionPool.using(url: try db.url(as: login)) { p in
                try await p.query("SELECT coalesce(array_agg(app ORDER BY app), '{}')::text FROM analytics.events").scalar(String.self)
            }
        }
        #expect(try await apps("onramp_analyst") == "{ops,yoked}")
        #expect(try await apps(before) == "{ops,yoked}")
        #expect(try await apps(after) == "{}")
        try await db.drop()
        try await ConnectionPool.using(url: db.adminURL) { admin in
            for role in [before, after, outsider] { try await admin.query("DROP ROLE \(role)") }
        }
    }
}
