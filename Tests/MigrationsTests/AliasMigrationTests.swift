import Foundation
import LibPQ
import LocalPostgres
import Migrations
import TestSupport
import Testing

/// Migration 022 on a database whose persons were found before aliases
/// were followed: what it keeps, and what it has the next run compute again.
@Suite("migrating to persons joined by alias")
struct AliasMigrationTests {
    @Test("the links gain their person; the funnels of an app whose log holds an alias, or an id sent both ways, are computed again")
    func upgrade() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let files = try MigrationFile.load(from: try TestDatabase.migrationsDirectory)
        let pool = db.pool(maxConnections: 1)
        _ = try await pool.withConnection { c in try Migrator(files: files.filter { $0.version < 22 }).migrate(c) }
        let t = Timestamps.microseconds(Date())
        try await pool.withConnection { c in
            try EventSeeder.insert(c, [
                SeedEvent(app: "yoked", type: "alias", messageId: "a", userId: "u-1", timestamp: t, previousId: "d-1"),
                SeedEvent(app: "forma", event: "welcome", anonymousId: "u-5", userId: "u-6", timestamp: t),
                SeedEvent(app: "forma", event: "signup", userId: "u-5", timestamp: t),
                SeedEvent(app: "ops", event: "welcome", anonymousId: "d-2", userId: "u-2", timestamp: t),
                SeedEvent(app: "umuve", event: "welcome", anonymousId: "d-3", userId: "u-3", timestamp: t),
                SeedEvent(app: "umuve", event: "welcome", anonymousId: "u-3", userId: "u-4", timestamp: t),
            ])
        }
        _ = try await pool.query(
            """
            INSERT INTO identity_links (app, anonymous_id, user_id, first_seen) VALUES
                ('ops', 'd-2', 'u-2', now()), ('forma', 'u-5', 'u-6', now()), ('umuve', 'd-3', 'u-3', now()),
                ('umuve', 'u-3', 'u-4', now())
            """)
        _ = try await pool.query(
            """
            INSERT INTO funnel_definitions (funnel, app, fingerprint, definition, built_at)
            SELECT f.app || '_onboarding', f.app, 'x', '{}', now() FROM unnest(ARRAY['yoked', 'ops', 'forma', 'umuve']) AS f(app)
            """)

        _ = try await pool.withConnection { c in try Migrator(files: files).migrate(c) }
        let kept = try await pool.query("SELECT app FROM funnel_definitions ORDER BY app").rows.map { try $0.decode(String.self, at: 0) }
        #expect(kept == ["ops"])
        let links = try await pool.query("SELECT anonymous_id || '>' || person_id FROM identity_links ORDER BY anonymous_id").rows
            .map { try $0.decode(String.self, at: 0) }
        #expect(links == ["d-2>u-2", "d-3>u-3", "u-3>u-4", "u-5>u-6"])
        // A link with no person is refused from now on.
        await #expect(throws: PostgresError.self) {
            try await pool.query("INSERT INTO identity_links (app, anonymous_id, user_id, first_seen) VALUES ('ops', 'd-9', 'u-9', now())")
        }
        await pool.close()
        try await db.drop()
    }

    @Test("a migrating role that is no superuser (it makes roles and owns the database) migrates to the end, the native funnel aggregate with it; the erase function stays the privacy role's")
    func migratorWithoutSuperuser() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let role = "migrator_\(db.name)"
        try await ConnectionPool.using(url: db.adminURL) { admin in
            _ = try await admin.query("CREATE ROLE \(role) LOGIN CREATEROLE")
            _ = try await admin.query("ALTER DATABASE \(db.name) OWNER TO \(role)")
        }
        let files = try MigrationFile.load(from: try TestDatabase.migrationsDirectory)
        let outcome = try await ConnectionPool.using(url: try db.url(as: role)) { pool in
            try await pool.withConnection { c in try Migrator(files: files).migrate(c) }
        }
        #expect(outcome.applied.count == files.count)
        // The native funnel aggregate's extension is trusted: the owner, no superuser, creates it.
        #expect(outcome.funnelAggregates == .native(version: "1.0"), "\(String(describing: outcome.funnelAggregates))")
        // The guard on counts of ungranted apps takes a superuser (the database's settings, pg_catalog's grants): it says so.
        if case .off(let reason)? = outcome.countsGuard {
            #expect(reason.contains("superuser"), "\(reason)")
        } else {
            Issue.record("the counts guard: \(String(describing: outcome.countsGuard))")
        }
        let pool = db.pool(maxConnections: 1)
        let owner = try await pool.query(
            "SELECT pg_get_userbyid(proowner) FROM pg_proc WHERE proname = 'onramp_privacy_erase'").scalar(String.self)
        #expect(owner == "onramp_privacy")
        let member = try await pool.query("SELECT pg_has_role($1, 'onramp_privacy', 'MEMBER')", [.text(role)]).scalar(Bool.self)
        #expect(!member)
        await pool.close()
        try await db.drop()
        _ = try? await ConnectionPool.using(url: db.adminURL) { admin in try await admin.query("DROP ROLE \(role)") }
    }
}
