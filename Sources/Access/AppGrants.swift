public import Foundation
public import LibPQ

/// Which apps a grant or a revoke names.
public enum AppSelection: Sendable, Equatable {
    /// Every app, today's and those to come.
    case every
    /// These apps, by name.
    case apps([String])
}

/// One row of `app_grants`: a login may read an app (or every app).
public struct AppGrant: Sendable, Equatable, Codable {
    public let login: String
    /// nil: every app.
    public let app: String?
    public let grantedAt: Date
    public let grantedBy: String
}

/// Why an access change was refused, in words the operator can act on.
public enum AccessError: Error, Equatable, CustomStringConvertible {
    case noSuchLogin(String)
    case notALogin(String)
    case loginExists(String)
    case invalidLoginName(String)
    case holdsEveryApp(login: String, apps: [String])
    case notGranted(login: String, apps: [String])

    public var description: String {
        switch self {
        case .noSuchLogin(let login):
            "no login named '\(login)' (make one with `onramp access create-login \(login) --app …`)"
        case .notALogin(let login):
            "'\(login)' cannot log in: grants are held by logins, and a member's grants are its own"
        case .loginExists(let login):
            "a role named '\(login)' exists already (grant it apps with `onramp access grant --login \(login) --app …`)"
        case .invalidLoginName(let login):
            "'\(login)' is no login name: 1–63 bytes, not starting with pg_ or onramp_"
        case .holdsEveryApp(let login, let apps):
            "'\(login)' holds every app, so \(apps.joined(separator: ", ")) cannot be taken alone: "
                + "revoke --all-apps, then grant the apps to keep"
        case .notGranted(let login, let apps):
            "'\(login)' holds no grant for \(apps.isEmpty ? "every app" : apps.joined(separator: ", "))"
        }
    }
}

/// The grants an owner keeps (`onramp access`, docs/access.md): which login
/// reads which apps through `analytics`. PostgreSQL applies them in the views
/// themselves; this type only writes and lists them, as the owner.
public enum AppGrants {
    /// Grants `login` the apps, or every app. Returns the apps newly granted
    /// (`nil` in the list: every app); a grant held already is left as it is.
    @discardableResult
    public static func grant(_ c: Connection, login: String, _ selection: AppSelection) throws -> [String?] {
        let role = try roleID(c, login)
        let result: QueryResult
        switch selection {
        case .every:
            result = try c.query(
                """
                INSERT INTO app_grants (login, login_name, app) SELECT oid, rolname, NULL FROM pg_roles WHERE oid = $1::oid
                ON CONFLICT DO NOTHING RETURNING app
                """, [.int(role)])
        case .apps(let apps):
            result = try c.query(
                """
                INSERT INTO app_grants (login, login_name, app) SELECT r.oid, r.rolname, a FROM pg_roles r, unnest($2::text[]) AS a
                WHERE r.oid = $1::oid
                ON CONFLICT DO NOTHING RETURNING app
                """, [.int(role), .textArray(apps)])
        }
        return try result.rows.map { try $0.decode(String?.self, at: 0) }
    }

    /// Takes the apps, or the every-app grant, from `login`; the next statement
    /// its sessions run no longer reads them. Taking an app from a login that
    /// holds every app is refused: nothing would change, which would mislead.
    @discardableResult
    public static func revoke(_ c: Connection, login: String, _ selection: AppSelection) throws -> Int {
        let role = try roleID(c, login)
        switch selection {
        case .every:
            let removed = try c.query("DELETE FROM app_grants WHERE login = $1::oid AND app IS NULL", [.int(role)]).affectedRows
            guard removed > 0 else { throw AccessError.notGranted(login: login, apps: []) }
            return removed
        case .apps(let apps):
            let every = try c.query("SELECT count(*) FROM app_grants WHERE login = $1::oid AND app IS NULL", [.int(role)]).scalar(Int.self)
            guard every == 0 else { throw AccessError.holdsEveryApp(login: login, apps: apps) }
            let held = try c.query(
                "SELECT app FROM app_grants WHERE login = $1::oid AND app = ANY($2::text[])", [.int(role), .textArray(apps)])
            let taken = Set(try held.rows.map { try $0.decode(String.self, at: 0) })
            let missing = apps.filter { !taken.contains($0) }
            guard missing.isEmpty else { throw AccessError.notGranted(login: login, apps: missing) }
            try c.query("DELETE FROM app_grants WHERE login = $1::oid AND app = ANY($2::text[])", [.int(role), .textArray(apps)])
            return taken.count
        }
    }

    /// Every grant, or one login's, by login then app (every app first).
    public static func list(_ c: Connection, login: String? = nil) throws -> [AppGrant] {
        if let login { _ = try roleID(c, login) } else { try clearStale(c) }
        let rows = try c.query(
            """
            SELECT r.rolname::text AS login, g.app, g.granted_at, g.granted_by
            FROM app_grants g JOIN pg_roles r ON r.oid = g.login
            WHERE $1::text IS NULL OR r.rolname = $1
            ORDER BY r.rolname COLLATE "C", g.app COLLATE "C" NULLS FIRST
            """, [login.map(PostgresValue.text) ?? .null]
        ).rows
        return try rows.map { row in
            AppGrant(
                login: try row.decode(String.self, "login"), app: try row.decode(String?.self, "app"),
                grantedAt: try row.decode(Date.self, "granted_at"), grantedBy: try row.decode(String.self, "granted_by"))
        }
    }

    /// Makes a login, a member of `onramp_reader` with the analyst's role
    /// settings, holding the apps given, in one transaction. The password is encrypted here, so only
    /// its verifier reaches the server.
    public static func createLogin(_ c: Connection, name: String, password: String, _ selection: AppSelection) throws {
        guard !name.isEmpty, name.utf8.count <= 63, !name.hasPrefix("pg_"), !name.hasPrefix("onramp_") else {
            throw AccessError.invalidLoginName(name)
        }
        let verifier = try c.encryptedPassword(password, user: name)
        try c.transaction { c in
            let exists = try c.query("SELECT count(*) FROM pg_roles WHERE rolname = $1", [.text(name)]).scalar(Int.self)
            guard exists == 0 else { throw AccessError.loginExists(name) }
            try c.query("SELECT onramp_create_login($1, $2)", [.text(name), .text(verifier)])
            try grant(c, login: name, selection)
        }
    }

    /// What the operator should know about `login`'s grants beside them:
    /// that it reads every app whatever it is granted (the owner, a
    /// superuser, an every-app grant), or that it may become a role that
    /// holds more (on Citus, where a worker sees the role, that role's apps).
    public static func notes(_ c: Connection, login: String) throws -> [String] {
        let row = try c.query(
            """
            SELECT r.rolsuper, r.oid = (SELECT nspowner FROM pg_namespace WHERE nspname = 'analytics') AS owner,
                   EXISTS (SELECT 1 FROM app_grants g WHERE g.login = r.oid AND g.login_name = r.rolname AND g.app IS NULL) AS every,
                   coalesce((SELECT string_agg(m, ', ' ORDER BY m) FROM unnest(ARRAY['onramp_analyst', 'onramp_operator']) AS m
                             WHERE r.rolname <> m AND pg_has_role(r.oid, m, 'MEMBER')), '') AS broader
            FROM pg_roles r WHERE r.rolname = $1
            """, [.text(login)]
        ).first
        guard let row else { return [] }
        var notes: [String] = []
        if try row.decode(Bool.self, "rolsuper") || row.decode(Bool.self, "owner") {
            notes.append("'\(login)' owns the schema or is a superuser: it reads every app whatever it is granted")
        } else if try row.decode(Bool.self, "every") {
            notes.append("'\(login)' holds every app: its grants of single apps add nothing until the every-app grant is revoked")
        }
        let broader = try row.decode(String.self, "broader")
        if !broader.isEmpty, try !row.decode(Bool.self, "every") {
            notes.append(
                "'\(login)' is a member of \(broader), which holds every app: on Citus it can SET ROLE to read them "
                    + "(make logins with `onramp access create-login`)")
        }
        return notes
    }

    /// Clears the rows of roles dropped or renamed since their grant: a new
    /// role under the old name must not hold them (docs/access.md).
    static func clearStale(_ c: Connection) throws {
        try c.query("DELETE FROM app_grants g WHERE NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = g.login AND r.rolname = g.login_name)")
    }

    /// The login's OID, or `noSuchLogin` (`notALogin` for a role that cannot log in).
    static func roleID(_ c: Connection, _ login: String) throws -> Int64 {
        try clearStale(c)
        let found = try c.query("SELECT oid::int8, rolcanlogin FROM pg_roles WHERE rolname = $1", [.text(login)])
        guard let row = found.first else { throw AccessError.noSuchLogin(login) }
        guard try row.decode(Bool.self, at: 1) else { throw AccessError.notALogin(login) }
        return try row.decode(Int64.self, at: 0)
    }
}
