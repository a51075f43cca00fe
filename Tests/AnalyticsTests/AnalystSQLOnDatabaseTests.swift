import Access
import Foundation
import LibPQ
import LocalPostgres
import Testing

/// What the analysts run — every `analytics` view, every sql/examples query
/// as the role it is written for, every Grafana panel's SQL for every funnel —
/// on a database the environment names (`ONRAMP_ANALYST_CHECK_URL`, a URL
/// whose user may be replaced by the roles, of a database the nightly job has
/// run on). `scripts/citus check` runs it against a Citus coordinator; the
/// answers themselves are checked on one PostgreSQL by the other suites here.
/// Then the per-app access matrix there (docs/access.md), with the logins and
/// grants made on `ONRAMP_ANALYST_CHECK_PRIMARY_URL` when the database is a
/// replica of it.
@Suite("analyst SQL on a given database", .serialized)
struct AnalystSQLOnDatabaseTests {
    static let url = ProcessInfo.processInfo.environment["ONRAMP_ANALYST_CHECK_URL"]
    static let primaryURL = ProcessInfo.processInfo.environment["ONRAMP_ANALYST_CHECK_PRIMARY_URL"] ?? url

    static func pool(as role: String) throws -> ConnectionPool {
        guard let url else { throw PostgresError(.connectionFailed, message: "no URL") }
        return ConnectionPool(url: try TestDatabase.url(url, as: role), maxConnections: 1)
    }

    @Test("every view, example and panel runs as its role, and the funnel views have rows",
          .enabled(if: url != nil, "ONRAMP_ANALYST_CHECK_URL names no database"))
    func everyQueryRuns() async throws {
        let analyst = try Self.pool(as: "onramp_analyst")
        let operatorPool = try Self.pool(as: "onramp_operator")
        var failures: [String] = []
        func run(_ pool: ConnectionPool, _ what: String, _ sql: String) async -> QueryResult? {
            do { return try await pool.query(sql) } catch {
                failures.append("\(what): \(String(reflecting: error))")
                return nil
            }
        }
        let views = try await analyst.query(
            "SELECT table_name FROM information_schema.views WHERE table_schema = 'analytics' ORDER BY 1"
        ).rows.map { try $0.decode(String.self, at: 0) }
        #expect(views.count >= 15)
        for view in views {
            // The name is the catalog's own, quoted as an identifier.
            let counted = await run(analyst, "view \(view)", "SELECT count(*) FROM analytics.\"\(view.replacingOccurrences(of: "\"", with: "\"\""))\"")
            if ["funnel_daily", "funnel_cohorts", "funnel_persons"].contains(view), let counted {
                #expect(try counted.scalar(Int.self) > 0, "analytics.\(view) is empty")
            }
        }
        let examples = try FileManager.default.contentsOfDirectory(
            atPath: AnalystSession.sqlDirectory.appendingPathComponent("examples").path
        ).filter { $0.hasSuffix(".sql") }.sorted()
        for file in examples {
            let sql = try AnalystSession.example(file)
            let role = sql.hasPrefix("-- role: onramp_operator") ? operatorPool : analyst
            _ = await run(role, file, sql)
        }
        let from = "2000-01-01T00:00:00Z", to = Timestamps.format(microseconds: Timestamps.microseconds(Date()) + 86_400_000_000)
        var panels = 0
        for panel in try GrafanaDashboardTests.panels() {
            for sql in GrafanaDashboardTests.queries(panel, from: from, to: to) {
                panels += 1
                _ = await run(analyst, "\(panel.dashboard) / \(panel.title)", sql)
            }
        }
        #expect(failures.isEmpty, "\(failures.count) failed:\n\(failures.joined(separator: "\n"))")
        print("analyst SQL: \(views.count) views, \(examples.count) examples, \(panels) panel queries; \(failures.count) failed")
        await analyst.close()
        await operatorPool.close()
    }

    @Test("per-app access: four logins (one app, two, none, every app) read exactly their apps' rows of every relation, the tables behind them too, and no bypass leaks",
          .enabled(if: url != nil, "ONRAMP_ANALYST_CHECK_URL names no database"))
    func accessMatrix() async throws {
        let owner = try Self.pool(as: "onramp")
        let primary = ConnectionPool(url: try #require(Self.primaryURL), maxConnections: 1)
        let apps = try await owner.query("SELECT DISTINCT app FROM events ORDER BY 1").rows.compactMap { $0.text(at: 0) }
        #expect(apps.count >= 3, "\(apps)")
        let tag = String(UUID().uuidString.prefix(8)).lowercased()
        let plan: [(name: String, apps: [String])] = [
            ("check_one_\(tag)", [apps[0]]), ("check_two_\(tag)", [apps[1], apps[2]]), ("check_none_\(tag)", []), ("check_every_\(tag)", apps),
        ]
        try await primary.withConnection { c in
            for login in plan {
                try AppGrants.createLogin(c, name: login.name, password: "check", login.name.hasPrefix("check_every") ? .every : .apps(login.apps))
            }
        }
        // On a replica: once the grants are replayed.
        for _ in 0..<100 {
            if try await owner.query("SELECT count(*) FROM app_grants WHERE login_name LIKE $1", [.text("check_%_\(tag)")]).scalar(Int.self) == 4 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        var cells = 0
        var unreadable: [String] = []
        let relations = try await AccessMatrixTests.relations(owner)
        for login in plan {
            let pool = try Self.pool(as: login.name)
            for relation in relations {
                #expect(relation.barrier && relation.filtered, "analytics.\(relation.name)")
                guard relation.hasApp else { continue }
                // What the owner cannot read whole here is not compared (on Citus, groups' traits: a lateral join it does not plan).
                guard let all = try? await AccessMatrixTests.perApp(owner, relation.name) else {
                    if login.name == plan[0].name { unreadable.append(relation.name) }
                    continue
                }
                #expect(try await AccessMatrixTests.perApp(pool, relation.name) == all.filter { login.apps.contains($0.key) }, "\(login.name): \(relation.name)")
                // An error on a hidden row would name it: the grant runs first, on every node.
                _ = try await pool.query(
                    "SELECT count(*) FROM analytics.\"\(relation.name)\" WHERE (CASE WHEN app = ANY($1::text[]) THEN 1 ELSE app::int END) = 1",
                    [.textArray(login.apps)])
                cells += apps.count
            }
            // The tables behind the views, which the analysts' roles read on Citus, keep the login's apps too.
            let readable = try await owner.query(
                """
                SELECT c.relname::text FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
                AND has_table_privilege('onramp_reader', c.oid, 'SELECT') ORDER BY 1
                """
            ).rows.compactMap { $0.text(at: 0) }
            for table in readable {
                let seen = try await pool.query("SELECT coalesce(array_agg(DISTINCT app ORDER BY app), '{}')::text FROM public.\"\(table)\"").scalar(String.self)
                let expected = try await owner.query(
                    "SELECT coalesce(array_agg(DISTINCT app ORDER BY app), '{}')::text FROM public.\"\(table)\" WHERE app = ANY($1::text[])",
                    [.textArray(login.apps)]
                ).scalar(String.self)
                #expect(seen == expected, "\(login.name): public.\(table)")
                _ = try await pool.query(
                    "SELECT count(*) FROM public.\"\(table)\" WHERE (CASE WHEN app = ANY($1::text[]) THEN 1 ELSE app::int END) = 1",
                    [.textArray(login.apps)])
            }
            // No role it may become reads more.
            try await pool.withConnection { c in
                try c.query("SET ROLE onramp_reader")
                let seen = try? c.query("SELECT count(*) FROM analytics.events WHERE app <> ALL($1::text[])", [.textArray(login.apps)]).scalar(Int.self)
                #expect(seen == nil || seen == 0)
                try c.query("RESET ROLE")
                #expect(throws: PostgresError.self) { try c.query("SET ROLE onramp_analyst") }
                // Counts of hidden rows: an instrumented plan is refused unless the login reads every app (docs/access.md, "Counts").
                let explain = "EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM analytics.events WHERE app = $1"
                if login.apps == apps {
                    #expect(try c.query(explain, [.text(apps[0])]).scalar(String.self).contains("Actual Rows"), "\(login.name)")
                } else {
                    let error = #expect(throws: PostgresError.self, "\(login.name)") { try c.query(explain, [.text(apps[0])]) }
                    #expect(error?.message == "EXPLAIN ANALYZE is not available to a login that does not read every app", "\(login.name)")
                }
            }
            await pool.close()
        }
        #expect(unreadable.count <= 1, "\(unreadable)")
        print("access matrix: \(relations.count) relations × \(plan.count) logins × \(apps.count) apps = \(cells) cells; not read whole here: \(unreadable)")
        try await primary.withConnection { c in
            for login in plan { try c.query("DELETE FROM app_grants WHERE login_name = $1", [.text(login.name)]) }
            for login in plan { try c.query("DROP ROLE \"\(login.name)\"") }
        }
        await owner.close()
        await primary.close()
    }
}
