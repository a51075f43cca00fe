import Foundation
import LibPQ
import Testing

/// What the analysts run — every `analytics` view, every sql/examples query
/// as the role it is written for, every Grafana panel's SQL for every funnel —
/// on a database the environment names (`ONRAMP_ANALYST_CHECK_URL`, a URL
/// whose user may be replaced by the roles, of a database the nightly job has
/// run on). `scripts/citus check` runs it against a Citus coordinator; the
/// answers themselves are checked on one PostgreSQL by the other suites here.
@Suite("analyst SQL on a given database")
struct AnalystSQLOnDatabaseTests {
    static let url = ProcessInfo.processInfo.environment["ONRAMP_ANALYST_CHECK_URL"]

    static func pool(as role: String) throws -> ConnectionPool {
        guard let url, var components = URLComponents(string: url) else { throw PostgresError(.connectionFailed, message: "no URL") }
        components.user = role
        components.password = nil
        return ConnectionPool(url: components.string ?? url, maxConnections: 1)
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
}
