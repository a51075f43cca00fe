import Access
import Foundation
import LibPQ
import LocalPostgres
import Migrations
import Testing

/// Per-app access, as PostgreSQL enforces it (docs/access.md): four logins
/// (one app, two apps, none, every app) over the four apps of the analyst dataset, and
/// every relation and function in `analytics` read from the catalogue at test
/// time, so what later migrations add is covered without touching this file.
@Suite("per-app access, over every relation and function in analytics", .serialized)
struct AccessMatrixTests {
    static let apps = ["forma", "ops", "umuve", "yoked"]
    /// Suffix → the apps its login is granted (the last by an every-app grant).
    static let logins: [(suffix: String, apps: [String])] = [("one", ["ops"]), ("two", ["forma", "yoked"]), ("none", []), ("every", apps)]

    /// The dataset, folded, with an erasure request per app for `log_erasures`, and the four logins.
    struct Matrix {
        let session: AnalystSession
        let logins: [(name: String, apps: [String], pool: ConnectionPool)]

        static func make() async throws -> Matrix {
            let session = try await AnalystSession.make()
            var logins: [(name: String, apps: [String], pool: ConnectionPool)] = []
            for (suffix, apps) in AccessMatrixTests.logins {
                let name = "\(session.db.name)_\(suffix)"
                try await session.admin.withConnection { c in
                    try AppGrants.createLogin(c, name: name, password: "test \(suffix)", suffix == "every" ? .every : .apps(apps))
                }
                logins.append((name, apps, ConnectionPool(url: try session.db.url(as: name), maxConnections: 1)))
            }
            _ = try await session.admin.withConnection { c in
                try c.query(
                    """
                    INSERT INTO privacy_requests (kind, app, requested_by, id_hashes)
                    VALUES ('erase', 'ops', 't', '{}'), ('erase', 'umuve', 't', '{}'), ('erase', 'umuve', 't', '{}'), ('unsuppress', 'ops', 't', '{}')
                    """)
            }
            return Matrix(session: session, logins: logins)
        }

        func close() async throws {
            for login in logins { await login.pool.close() }
            try await session.close()
            try await ConnectionPool.using(url: session.db.adminURL) { admin in
                for login in logins { try await admin.query("DROP ROLE IF EXISTS \"\(login.name)\"") }
            }
        }
    }

    /// Every relation in analytics, from the catalogue, with whether it has an `app` column.
    static func relations(_ pool: ConnectionPool) async throws -> [(name: String, hasApp: Bool, barrier: Bool, filtered: Bool)] {
        try await pool.query(
            """
            SELECT c.relname::text AS name,
                   EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'app' AND NOT a.attisdropped) AS has_app,
                   coalesce('security_barrier=true' = ANY(c.reloptions), false) AS barrier,
                   pg_get_viewdef(c.oid) LIKE '%onramp_granted_apps()%' AS filtered
            FROM pg_class c WHERE c.relnamespace = 'analytics'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
            ORDER BY 1
            """
        ).rows.map { ($0.text(at: 0) ?? "", try $0.decode(Bool.self, at: 1), try $0.decode(Bool.self, at: 2), try $0.decode(Bool.self, at: 3)) }
    }

    /// Per app, the row count and a digest of the rows' text.
    static func perApp(_ pool: ConnectionPool, _ relation: String) async throws -> [String: String] {
        let rows = try await pool.query(
            """
            SELECT app, count(*)::text || ' ' || md5(string_agg(t::text, E'\\n' ORDER BY t::text)) FROM analytics."\(relation)" t GROUP BY app
            """
        ).rows
        return Dictionary(uniqueKeysWithValues: rows.map { ($0.text(at: 0) ?? "NULL", $0.text(at: 1) ?? "") })
    }

    @Test("each login reads exactly its apps' rows in every relation, as the owner reads them; the rest is as if those apps did not exist")
    func everyRelation() async throws {
        let matrix = try await Matrix.make()
        let owner = matrix.session.admin
        let relations = try await Self.relations(owner)
        #expect(relations.count >= 22, "\(relations.map(\.name))")
        var cells = 0
        for relation in relations {
            // Every relation applies the grants itself, behind a security barrier.
            #expect(relation.barrier && relation.filtered, "analytics.\(relation.name) is no security-barrier view applying the grants")
            if relation.hasApp {
                let all = try await Self.perApp(owner, relation.name)
                for login in matrix.logins {
                    let seen = try await Self.perApp(login.pool, relation.name)
                    #expect(seen == all.filter { login.apps.contains($0.key) }, "\(login.name) in \(relation.name)")
                    cells += Self.apps.count
                }
            } else {
                // log_erasures: a count over the granted apps.
                #expect(relation.name == "log_erasures", "analytics.\(relation.name) has no app column: say how grants apply to it")
                for login in matrix.logins {
                    let seen = try await login.pool.query("SELECT erasures FROM analytics.log_erasures").scalar(Int.self)
                    let expected = try await owner.query(
                        "SELECT count(*) FROM privacy_requests WHERE kind = 'erase' AND app = ANY($1::text[])", [.textArray(login.apps)]
                    ).scalar(Int.self)
                    #expect(seen == expected, "\(login.name) in log_erasures")
                    cells += Self.apps.count
                }
            }
        }
        print("access matrix: \(relations.count) relations × \(matrix.logins.count) logins × \(Self.apps.count) apps = \(cells) cells")
        try await matrix.close()
    }

    @Test("every function in analytics is pure or answers only for the granted apps: funnel_report for an ungranted app is the one for an app that does not exist")
    func everyFunction() async throws {
        let matrix = try await Matrix.make()
        let owner = matrix.session.admin
        let functions = try await owner.query(
            """
            SELECT p.oid::regprocedure::text, p.provolatile = 'i' AS immutable, p.prosecdef
            FROM pg_proc p WHERE p.pronamespace = 'analytics'::regnamespace ORDER BY 1
            """
        ).rows.map { ($0.text(at: 0) ?? "", try $0.decode(Bool.self, at: 1), try $0.decode(Bool.self, at: 2)) }
        #expect(functions.count >= 15)
        // Immutable functions read no table; the one that reads is run below. A new one that reads must join it.
        let reading = functions.filter { !$0.1 || $0.2 }.map(\.0)
        #expect(
            reading == [
                "analytics.funnel_report(jsonb,timestamp with time zone)",
                "analytics.funnel_report_persons(jsonb,integer,text,timestamp with time zone)",
                "analytics.funnel_step_persons(text,integer,text,text,text,timestamp with time zone)",
            ], "\(reading)")
        // Per app, a funnel of its two most frequent events.
        for app in Self.apps {
            let top = try await owner.query(
                """
                SELECT CASE type WHEN 'screen' THEN 'screen' ELSE 'event' END, event FROM analytics.events
                WHERE app = $1 AND event IS NOT NULL GROUP BY 1, 2 ORDER BY count(*) DESC, 2 LIMIT 2
                """, [.text(app)]
            ).rows.map { #""\#($0.text(at: 0) ?? "")": "\#($0.text(at: 1) ?? "")""# }
            func definition(_ app: String) -> String {
                #"{"app": "\#(app)", "window": "7d", "steps": [{\#(top[0])}, {\#(top[1])}]}"#
            }
            let query = "SELECT step_index, step_name, persons, drop_off, in_progress FROM analytics.funnel_report($1::jsonb, now()) ORDER BY 1"
            let ownerAnswer = try await owner.query(query, [.text(definition(app))]).table
            let nowhere = try await owner.query(query, [.text(definition("no such app"))]).table
            #expect(ownerAnswer != nowhere, "\(app): the app's funnel counts someone")
            let persons = "SELECT person_id, ids, last_step_time FROM analytics.funnel_report_persons($1::jsonb, 1, 'reached', now())"
            let ownerPersons = try await owner.query(persons, [.text(definition(app))]).table
            #expect(!ownerPersons.isEmpty, "\(app): the app's funnel lists someone")
            for login in matrix.logins {
                let seen = try await login.pool.query(query, [.text(definition(app))]).table
                #expect(seen == (login.apps.contains(app) ? ownerAnswer : nowhere), "\(login.name), \(app)")
                let listed = try await login.pool.query(persons, [.text(definition(app))]).table
                #expect(listed == (login.apps.contains(app) ? ownerPersons : []), "\(login.name), \(app)")
            }
            // A configured funnel's persons: the owner's list to a login granted the app; to the others, no such funnel.
            let funnels = try await owner.query("SELECT funnel FROM funnel_definitions WHERE app = $1 ORDER BY 1", [.text(app)]).rows.compactMap { $0.text(at: 0) }
            var listing = 0
            for funnel in funnels {
                let persons = "SELECT person_id, group_id, ids, last_step_time FROM analytics.funnel_step_persons($1, 1, 'reached')"
                let listed = try await owner.query(persons, [.text(funnel)]).table
                if !listed.isEmpty { listing += 1 }
                for login in matrix.logins {
                    do {
                        let seen = try await login.pool.query(persons, [.text(funnel)]).table
                        #expect(login.apps.contains(app) && seen == listed, "\(login.name), \(funnel)")
                    } catch let error as PostgresError {
                        #expect(!login.apps.contains(app) && error.message.contains("unknown funnel"), "\(login.name), \(funnel): \(error.message)")
                    }
                }
            }
            #expect(listing > 0, "\(app): a funnel lists someone")
        }
        try await matrix.close()
    }

    @Test("the bypasses do not leak: leaky functions and RAISE in a WHERE, errors, COPY, temporary objects, SET ROLE, EXPLAIN's text, EXPLAIN ANALYZE's counts, the scan counters")
    func bypasses() async throws {
        let matrix = try await Matrix.make()
        let owner = matrix.session.admin
        let login = matrix.logins[0]
        let hidden = Self.apps.filter { !login.apps.contains($0) }
        let relations = try await Self.relations(owner).filter(\.hasApp).map(\.name)
        // Ids of the hidden apps, to look for in what the login can see.
        let hiddenIds = try await owner.query(
            "SELECT DISTINCT anonymous_id FROM analytics.events WHERE app <> ALL($1::text[])", [.textArray(login.apps)]
        ).rows.compactMap { $0.text(at: 0) }.filter { $0.count >= 2 }
        #expect(!hiddenIds.isEmpty)
        try await login.pool.withConnection { c in
            // Read-only is a guard, not a boundary: a login can turn it off and make temporary objects.
            try c.query("SET default_transaction_read_only = off")
            try c.executeScript(
                """
                CREATE TEMP TABLE seen (app text, row_text text);
                CREATE FUNCTION pg_temp.peek(app text, row_text text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS $$
                BEGIN INSERT INTO seen VALUES (app, row_text); RETURN true; END $$;
                CREATE FUNCTION pg_temp.boom(app text, granted text[]) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS $$
                BEGIN IF app <> ALL(granted) THEN RAISE EXCEPTION 'saw %', app; END IF; RETURN true; END $$;
                """)
            for relation in relations {
                // A cheap leaky function is still called only on rows past the barrier.
                try c.query("SELECT count(*) FROM analytics.\"\(relation)\" t WHERE pg_temp.peek(t.app, t::text)")
                // An error raised on a hidden row would say it exists (and name it): none is raised.
                try c.query("SELECT count(*) FROM analytics.\"\(relation)\" t WHERE pg_temp.boom(t.app, $1)", [.textArray(login.apps)])
                try c.query(
                    "SELECT count(*) FROM analytics.\"\(relation)\" t WHERE 1 / (CASE WHEN t.app = ANY($1::text[]) THEN 1 ELSE 0 END) = 1",
                    [.textArray(login.apps)])
            }
            let peeked = try c.query("SELECT DISTINCT app FROM seen ORDER BY 1").rows.compactMap { $0.text(at: 0) }
            #expect(peeked == login.apps)
            let rowsText = try c.query("SELECT string_agg(row_text, ' ') FROM seen").scalar(String.self)
            #expect(hiddenIds.allSatisfy { !rowsText.contains("\"\($0)\"") && !rowsText.contains(",\($0),") }, "a hidden app's id reached a leaky function")
            // COPY reads through the views, or not at all.
            var copied = Data()
            try c.copyOut("COPY (SELECT app, anonymous_id FROM analytics.events) TO STDOUT") { copied.append(contentsOf: $0) }
            let copiedApps = Set(String(decoding: copied, as: UTF8.self).split(separator: "\n").map { String($0.split(separator: "\t")[0]) })
            #expect(copiedApps == Set(login.apps))
            for statement in [
                "COPY public.events TO STDOUT", "SELECT count(*) FROM analytics_internal.events", "SELECT count(*) FROM public.app_grants",
                "CREATE TEMP VIEW around AS SELECT * FROM analytics_internal.events", "SET SESSION AUTHORIZATION onramp_analyst",
                // A login holding some apps is no member of the roles that hold every app.
                "SET ROLE onramp_analyst", "SET ROLE onramp_operator",
            ] {
                #expect(throws: PostgresError.self, "\(statement)") { try c.query(statement) }
            }
            // A temporary view over analytics, or a role the login may become, still reads as the login.
            try c.query("CREATE TEMP VIEW mine AS SELECT * FROM analytics.events")
            #expect(try c.query("SELECT array_agg(DISTINCT app)::text FROM mine").scalar(String.self) == "{ops}")
            try c.query("SET ROLE onramp_reader")
            #expect(try c.query("SELECT array_agg(DISTINCT app)::text FROM analytics.events").scalar(String.self) == "{ops}")
            #expect(try c.query("SELECT count(*) FROM analytics.funnel_persons WHERE app <> 'ops'").scalar(Int.self) == 0)
            try c.query("RESET ROLE")
            // EXPLAIN's text names no hidden app or id.
            for relation in ["events", "funnel_persons", "apps", "event_catalog"] {
                let plan = try c.query("EXPLAIN (VERBOSE, FORMAT JSON) SELECT * FROM analytics.\"\(relation)\"").scalar(String.self)
                #expect(hidden.allSatisfy { !plan.contains("\"\($0)\"") && !plan.contains("'\($0)'") }, "\(relation): \(plan.prefix(300))")
                #expect(hiddenIds.allSatisfy { !plan.contains("'\($0)'") }, "\(relation)")
            }
            // Its counts would: fetched through the (app, anonymous_id) index, a hidden id's rows would be
            // "Rows Removed by Filter". An instrumented plan is refused to this login, in every form, the
            // same for a hidden app's id and for an app that does not exist (docs/access.md, "Counts").
            let probe = "SELECT * FROM analytics.events WHERE app = $1 AND anonymous_id = $2"
            for (app, id) in [(hidden[0], hiddenIds[0]), ("no such app", "no such id")] {
                for form in [
                    "EXPLAIN (ANALYZE) \(probe)", "EXPLAIN (ANALYZE, TIMING off, SUMMARY off, COSTS off) \(probe)",
                    "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) \(probe)",
                ] {
                    let error = #expect(throws: PostgresError.self, "\(form)") { try c.query(form, [.text(app), .text(id)]) }
                    #expect(error?.sqlState == "42501", "\(form)")
                    #expect(error?.message == "EXPLAIN ANALYZE is not available to a login that does not read every app", "\(form)")
                }
            }
            for statement in [
                "DO $$ BEGIN EXECUTE 'EXPLAIN ANALYZE SELECT count(*) FROM analytics.events'; END $$",
                "PREPARE counted AS SELECT count(*) FROM analytics.events WHERE app = 'umuve'; EXPLAIN ANALYZE EXECUTE counted",
                // The scan counters would count the same rows: closed to the login.
                "SELECT sum(idx_tup_read) FROM pg_stat_all_indexes", "SELECT sum(idx_tup_fetch) FROM pg_stat_xact_all_tables",
                "SELECT sum(seq_tup_read) FROM pg_stat_all_tables", "SELECT sum(heap_blks_read) FROM pg_statio_all_tables",
                "SELECT tup_fetched FROM pg_stat_database WHERE datname = current_database()",
                "SELECT blks_hit FROM pg_stat_database WHERE datname = current_database()",
                "SELECT pg_stat_get_xact_tuples_returned('public.events'::regclass)",
                // How often an index was probed: once per row a nested loop fetched, hidden rows' included.
                "SELECT sum(idx_scan) FROM pg_stat_all_indexes", "SELECT pg_stat_get_xact_numscans('public.events'::regclass)",
                // The library that guards is loaded as the session starts; the login cannot unload it.
                "SET session_preload_libraries = ''",
            ] {
                let error = #expect(throws: PostgresError.self, "\(statement)") { try c.executeScript(statement) }
                #expect(error?.sqlState == "42501", "\(statement): \(error?.message ?? "")")
            }
            // Plain EXPLAIN, and the table-wide sizes the docs name, stay open to it.
            try c.query("EXPLAIN SELECT * FROM analytics.events WHERE app = 'umuve'")
            try c.query("SELECT sum(n_live_tup) FROM pg_stat_all_tables")
            // A hidden app and one that does not exist answer alike.
            for relation in relations {
                let hiddenCount = try c.query("SELECT count(*) FROM analytics.\"\(relation)\" WHERE app = $1", [.text(hidden[0])]).scalar(Int.self)
                let noneCount = try c.query("SELECT count(*) FROM analytics.\"\(relation)\" WHERE app = 'no such app'").scalar(Int.self)
                #expect(hiddenCount == 0 && noneCount == 0, "\(relation)")
            }
        }
        // As a session's first statement, and for the login with no app; the login that reads every app may.
        let explain = "EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM analytics.events WHERE app = 'umuve'"
        for (index, refused) in [(1, true), (2, true), (3, false)] {
            let fresh = try Connection.connect(try matrix.session.db.url(as: matrix.logins[index].name))
            if refused {
                #expect(throws: PostgresError.self, "\(matrix.logins[index].name)") { try fresh.query(explain) }
            } else {
                #expect(try fresh.query(explain).scalar(String.self).contains("Actual Rows"))
            }
        }
        try await matrix.close()
    }

    @Test("the guard on counts holds for a login that does not inherit its roles, beside auto_explain in either order, and over a role's own preload setting")
    func countsGuardEdges() async throws {
        let matrix = try await Matrix.make()
        let db = matrix.session.db
        let explain = "EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM analytics.events WHERE app = 'umuve'"
        let refusal = "EXPLAIN ANALYZE is not available to a login that does not read every app"
        // A login that does not inherit reads analytics only after SET ROLE: it is refused all the same.
        let plain = "\(db.name)_noinherit"
        try await matrix.session.admin.withConnection { c in
            try AppGrants.createLogin(c, name: plain, password: "test", .apps(["ops"]))
            try c.query("ALTER ROLE \"\(plain)\" NOINHERIT")
        }
        let noInherit = try Connection.connect(try db.url(as: plain))
        try noInherit.query("SET ROLE onramp_reader")
        #expect(try noInherit.query("SELECT array_agg(DISTINCT app)::text FROM analytics.events").scalar(String.self) == "{ops}")
        let refused = #expect(throws: PostgresError.self) { try noInherit.query(explain) }
        #expect(refused?.message == refusal)
        // auto_explain instruments the guard's own question too: it is asked once, not again within itself.
        let admin = try Connection.connect(db.url)
        try admin.executeScript("LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on")
        #expect(try admin.query("SELECT count(*) FROM analytics.events").scalar(Int.self) > 0)
        #expect(try admin.query(explain).scalar(String.self).contains("Actual Rows"))
        // auto_explain loaded before the guard instruments the plan inside the guard's own call: refused after it.
        let instrumented = matrix.logins[0].name
        try admin.executeScript(
            """
            ALTER ROLE "\(instrumented)" SET session_preload_libraries = 'auto_explain', 'onramp_funnel';
            ALTER ROLE "\(instrumented)" SET auto_explain.log_min_duration = 0;
            ALTER ROLE "\(instrumented)" SET auto_explain.log_analyze = on
            """)
        let logged = try Connection.connect(try db.url(as: instrumented))
        try logged.query("SET client_min_messages = log")
        let loggedRefusal = #expect(throws: PostgresError.self) { try logged.query("SELECT count(*) FROM analytics.events WHERE app = 'umuve'") }
        #expect(loggedRefusal?.message == refusal)
        try admin.query("ALTER ROLE \"\(instrumented)\" RESET ALL")
        // A role's own session_preload_libraries replaces the database's: migrate adds the library to it.
        let login = matrix.logins[1].name
        try admin.query("ALTER ROLE \"\(login)\" SET session_preload_libraries = 'plpgsql'")
        let unguarded = try Connection.connect(try db.url(as: login))
        #expect(try unguarded.query(explain).scalar(String.self).contains("Actual Rows"), "the setting replaced the database's")
        #expect(try CountsGuard.install(admin) == .on)
        let setting = try admin.query(
            "SELECT c FROM pg_db_role_setting s, unnest(s.setconfig) AS c WHERE s.setrole = $1::regrole AND c LIKE 'session_preload_libraries=%'",
            [.text(login)]
        ).scalar(String.self)
        #expect(setting == "session_preload_libraries=plpgsql, onramp_funnel", "\(setting)")
        let guarded = try Connection.connect(try db.url(as: login))
        let again = #expect(throws: PostgresError.self) { try guarded.query(explain) }
        #expect(again?.message == refusal)
        try await matrix.close()
        try await ConnectionPool.using(url: db.adminURL) { admin in _ = try await admin.query("DROP ROLE IF EXISTS \"\(plain)\"") }
    }

    @Test("a grant and a revoke take effect for the login's next statement, in a session already open")
    func grantAndRevokeAreImmediate() async throws {
        let matrix = try await Matrix.make()
        let login = matrix.logins[0]
        let apps = "SELECT coalesce(array_agg(app ORDER BY app), '{}')::text FROM analytics.apps"
        let funnels = "SELECT count(DISTINCT app) FROM analytics.funnel_cohorts"
        try await login.pool.withConnection { c in
            #expect(try c.query(apps).scalar(String.self) == "{ops}")
            try AppGrants.grant(try Connection.connect(matrix.session.db.url), login: login.name, .apps(["forma"]))
            #expect(try c.query(apps).scalar(String.self) == "{forma,ops}")
            #expect(try c.query(funnels).scalar(Int.self) == 2)
            try AppGrants.revoke(try Connection.connect(matrix.session.db.url), login: login.name, .apps(["ops", "forma"]))
            #expect(try c.query(apps).scalar(String.self) == "{}", "revoking the last grant leaves no app")
            #expect(try c.query("SELECT count(*) FROM analytics.events").scalar(Int.self) == 0)
            try AppGrants.grant(try Connection.connect(matrix.session.db.url), login: login.name, .every)
            #expect(try c.query(apps).scalar(String.self) == "{forma,ops,umuve,yoked}")
        }
        try await matrix.close()
    }
}
