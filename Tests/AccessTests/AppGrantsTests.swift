import Access
import Foundation
import LibPQ
import LocalPostgres
import Testing

/// The owner's grants: what `onramp access` writes, and the logins it makes.
@Suite("app grants")
struct AppGrantsTests {
    @Test("create-login makes a reader's login (not a member of the every-app roles) with the analyst's settings, an encrypted password and only its apps")
    func createLogin() async throws {
        let db = try await TestDatabase.create()
        // Roles are the cluster's: a name no other test uses, with a quote and capitals that need quoting.
        let name = "Ana O'Neil \(db.name)"
        try await db.pool(maxConnections: 1).withConnection { c in
            try AppGrants.createLogin(c, name: name, password: "s3cret pass", .apps(["ops", "forma"]))
            let role = try c.query(
                """
                SELECT r.rolcanlogin, pg_has_role(r.oid, 'onramp_reader', 'MEMBER') AND NOT pg_has_role(r.oid, 'onramp_analyst', 'MEMBER') AS analyst,
                       a.rolpassword LIKE 'SCRAM-SHA-256$%' AS scram, array_to_string(s.setconfig, ';') AS settings
                FROM pg_roles r JOIN pg_authid a ON a.oid = r.oid
                LEFT JOIN LATERAL (SELECT array_agg(x ORDER BY x) AS setconfig FROM pg_db_role_setting d, unnest(d.setconfig) x
                                   WHERE d.setrole = r.oid AND d.setdatabase = 0) s ON true
                WHERE r.rolname = $1
                """, [.text(name)])
            let row = try #require(role.first)
            #expect(try row.decode(Bool.self, "rolcanlogin") && row.decode(Bool.self, "analyst") && row.decode(Bool.self, "scram"))
            #expect(try row.decode(String.self, "settings")
                == "default_transaction_read_only=on;search_path=analytics;statement_timeout=60s")
            #expect(try AppGrants.list(c, login: name).map(\.app) == ["forma", "ops"])
            #expect(throws: AccessError.loginExists(name)) { try AppGrants.createLogin(c, name: name, password: "x", .every) }
            #expect(throws: AccessError.invalidLoginName("onramp_writer")) {
                try AppGrants.createLogin(c, name: "onramp_writer", password: "x", .every)
            }
            try c.query("DROP ROLE \"\(name.replacingOccurrences(of: "\"", with: "\"\""))\"")
        }
        try await db.drop()
    }

    @Test("grant and revoke say what was wrong: an unknown login, an app not held, an app of a login that holds every app")
    func grantAndRevoke() async throws {
        let db = try await TestDatabase.create()
        let login = "grants_\(db.name)"
        try await db.pool(maxConnections: 1).withConnection { c in
            try c.query("CREATE ROLE \(login) LOGIN")
            #expect(throws: AccessError.noSuchLogin("nobody_\(db.name)")) {
                try AppGrants.grant(c, login: "nobody_\(db.name)", .apps(["ops"]))
            }
            #expect(try AppGrants.grant(c, login: login, .apps(["ops", "yoked"])) == ["ops", "yoked"])
            #expect(try AppGrants.grant(c, login: login, .apps(["ops"])).isEmpty, "held already")
            #expect(throws: AccessError.notGranted(login: login, apps: ["forma"])) { try AppGrants.revoke(c, login: login, .apps(["ops", "forma"])) }
            #expect(try AppGrants.list(c, login: login).map(\.app) == ["ops", "yoked"], "a refused revoke takes nothing")
            #expect(try AppGrants.revoke(c, login: login, .apps(["ops"])) == 1)
            try AppGrants.grant(c, login: login, .every)
            #expect(throws: AccessError.holdsEveryApp(login: login, apps: ["yoked"])) { try AppGrants.revoke(c, login: login, .apps(["yoked"])) }
            #expect(try AppGrants.list(c, login: login).map(\.app) == [nil, "yoked"])
            try AppGrants.revoke(c, login: login, .every)
            #expect(throws: AccessError.notGranted(login: login, apps: [])) { try AppGrants.revoke(c, login: login, .every) }
            // A role dropped and made again under its name does not inherit the grants: they were the old role's.
            try c.query("DROP ROLE \(login)")
            try c.query("CREATE ROLE \(login) LOGIN")
            #expect(try AppGrants.list(c, login: login).isEmpty)
            // Nor does a role renamed keep them, nor a new role under its old name get them.
            try AppGrants.grant(c, login: login, .apps(["ops"]))
            try c.query("ALTER ROLE \(login) RENAME TO \(login)_2")
            try c.query("CREATE ROLE \(login) LOGIN")
            #expect(try AppGrants.list(c, login: login).isEmpty && AppGrants.list(c, login: "\(login)_2").isEmpty)
            #expect(try c.query("SELECT count(*) FROM app_grants WHERE login_name IN ($1, $2)", [.text(login), .text("\(login)_2")]).scalar(Int.self) == 0)
            // Grants are held by logins; one that may become an every-app role is told what that means on Citus.
            try c.query("CREATE ROLE \(login)_group NOLOGIN")
            #expect(throws: AccessError.notALogin("\(login)_group")) { try AppGrants.grant(c, login: "\(login)_group", .apps(["ops"])) }
            try c.query("GRANT onramp_analyst TO \(login)")
            try AppGrants.grant(c, login: login, .apps(["ops"]))
            #expect(try AppGrants.notes(c, login: login).contains { $0.contains("member of onramp_analyst") })
            try AppGrants.grant(c, login: login, .every)
            #expect(try AppGrants.notes(c, login: login).contains { $0.contains("holds every app") })
            try c.query("DROP ROLE \(login)_group")
            try c.query("DROP ROLE \(login)_2")
            try c.query("DROP ROLE \(login)")
        }
        try await db.drop()
    }
}
