import Foundation
import LibPQ
import Testing

/// Every panel's SQL in dashboards/grafana, with Grafana's macros and the
/// dashboard variables expanded, run as onramp_analyst on seeded data.
@Suite("Grafana dashboards")
struct GrafanaDashboardTests {
    static var grafanaDirectory: URL {
        AnalystSession.sqlDirectory.deletingLastPathComponent().appendingPathComponent("dashboards/grafana")
    }

    struct Panel {
        let dashboard: String
        let title: String
        let sql: String
        let variables: [String: [String]]
    }

    static func panels() throws -> [Panel] {
        let directory = grafanaDirectory.appendingPathComponent("dashboards")
        var result: [Panel] = []
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() where file.hasSuffix(".json") {
            let data = try Data(contentsOf: directory.appendingPathComponent(file))
            guard let dashboard = try JSONSerialization.jsonObject(with: data) as? [String: Any] else { continue }
            var variables: [String: [String]] = [:]
            for variable in ((dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]]) ?? [] {
                guard let name = variable["name"] as? String else { continue }
                if variable["type"] as? String == "custom", let query = variable["query"] as? String {
                    variables[name] = query.split(separator: ",").map(String.init)
                } else if variable["type"] as? String == "textbox", let query = variable["query"] as? String {
                    variables[name] = [query]  // what the analyst types; its default
                } else {
                    variables[name] = ["yoked_onboarding", "ops_employee", "ops_company_creator", "umuve_onboarding", "forma_onboarding"]
                }
            }
            func walk(_ panels: [[String: Any]]) {
                for panel in panels {
                    walk(panel["panels"] as? [[String: Any]] ?? [])
                    for target in panel["targets"] as? [[String: Any]] ?? [] {
                        if let sql = target["rawSql"] as? String {
                            result.append(Panel(dashboard: file, title: panel["title"] as? String ?? "?", sql: sql, variables: variables))
                        }
                    }
                }
            }
            walk(dashboard["panels"] as? [[String: Any]] ?? [])
        }
        return result
    }

    /// Grafana's PostgreSQL macros, as Grafana expands them for a time range.
    static func expandMacros(_ sql: String, from: String, to: String) -> String {
        var out = sql.replacingOccurrences(of: "$__timeFrom()", with: "'\(from)'::timestamptz")
            .replacingOccurrences(of: "$__timeTo()", with: "'\(to)'::timestamptz")
        while let range = out.range(of: "$__timeFilter(") {
            var depth = 1
            var index = range.upperBound
            while index < out.endIndex, depth > 0 {
                if out[index] == "(" { depth += 1 }
                if out[index] == ")" { depth -= 1 }
                if depth > 0 { index = out.index(after: index) }
            }
            let column = out[range.upperBound..<index]
            out.replaceSubrange(range.lowerBound...index, with: "\(column) BETWEEN '\(from)'::timestamptz AND '\(to)'::timestamptz")
        }
        return out
    }

    /// A variable as Grafana interpolates it: `${name:sqlstring}` as a quoted
    /// SQL literal (quotes doubled), `$name` as it is.
    static func substitute(_ sql: String, _ name: String, _ value: String) -> String {
        sql.replacingOccurrences(of: "${\(name):sqlstring}", with: "'" + value.replacingOccurrences(of: "'", with: "''") + "'")
            .replacingOccurrences(of: "$\(name)", with: value)
    }

    /// The panel's SQL as Grafana sends it for the time range, once for each
    /// value of each variable it names.
    static func queries(_ panel: Panel, from: String, to: String) -> [String] {
        var variants = [expandMacros(panel.sql, from: from, to: to)]
        for (name, values) in panel.variables {
            variants = variants.flatMap { sql in
                sql.contains("$\(name)") || sql.contains("${\(name):") ? values.map { substitute(sql, name, $0) } : [sql]
            }
        }
        return variants
    }

    /// The variables Grafana fills by running SQL: dashboard, name, query.
    static func queryVariables() throws -> [(dashboard: String, name: String, sql: String)] {
        let directory = grafanaDirectory.appendingPathComponent("dashboards")
        return try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted().filter { $0.hasSuffix(".json") }.flatMap { file in
            let dashboard = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent(file))) as? [String: Any]
            let list = ((dashboard?["templating"] as? [String: Any])?["list"] as? [[String: Any]]) ?? []
            return list.compactMap { variable -> (String, String, String)? in
                guard variable["type"] as? String == "query", let name = variable["name"] as? String, let sql = variable["query"] as? String else { return nil }
                return (file, name, sql)
            }
        }
    }

    @Test("under per-app grants, each dashboard variable offers a login only its apps' funnels, and its panels show it what the analyst sees of them")
    func dashboardsPerLogin() async throws {
        let matrix = try await AccessMatrixTests.Matrix.make()
        let session = matrix.session
        let funnelApps = Dictionary(uniqueKeysWithValues: try await session.admin.query("SELECT DISTINCT funnel, app FROM funnel_cohorts").rows.map {
            ($0.text(at: 0) ?? "", $0.text(at: 1) ?? "")
        })
        let variables = try Self.queryVariables()
        #expect(variables.count >= 6)
        for variable in variables {
            let all = try await session.analyst.query(variable.sql).rows.compactMap { $0.text(at: 0) }
            #expect(!all.isEmpty, "\(variable.dashboard) $\(variable.name)")
            for login in matrix.logins {
                let offered = try await login.pool.query(variable.sql).rows.compactMap { $0.text(at: 0) }
                #expect(offered == all.filter { login.apps.contains(funnelApps[$0] ?? "") }, "\(login.name): \(variable.dashboard) $\(variable.name)")
            }
        }
        // Every panel, for every funnel: the one-app login sees what the analyst sees of its app's funnels,
        // and of the other apps' what the login with no app sees: nothing of them.
        let (login, nobody) = (matrix.logins[0], matrix.logins[2])
        let from = Timestamps.format(microseconds: AnalystDataset.t0 - 7 * AnalystDataset.day)
        let to = Timestamps.format(microseconds: Timestamps.microseconds(Date()) + AnalystDataset.day)
        var compared = (granted: 0, hidden: 0)
        for panel in try Self.panels() {
            for sql in Self.queries(panel, from: from, to: to) {
                let named = Set(funnelApps.filter { sql.contains("'\($0.key)'") }.map(\.value))
                    .union(AccessMatrixTests.apps.filter { sql.contains("'\($0)'") })
                guard !named.isEmpty else { continue }
                let seen = try await login.pool.query(sql).table
                if named.isSubset(of: login.apps) {
                    #expect(seen == (try await session.analyst.query(sql).table), "\(panel.dashboard) / \(panel.title)")
                    compared.granted += 1
                } else if named.isDisjoint(with: login.apps) {
                    #expect(seen == (try await nobody.pool.query(sql).table), "\(panel.dashboard) / \(panel.title)")
                    compared.hidden += 1
                }
            }
        }
        #expect(compared.granted >= 8 && compared.hidden >= 20, "\(compared)")
        try await matrix.close()
    }

    @Test("seven dashboards, one per concern, every panel with SQL")
    func dashboardsExist() throws {
        let panels = try Self.panels()
        #expect(Set(panels.map(\.dashboard)) == ["breakdowns.json", "completion-trend.json", "drop-off.json", "funnel-steps.json", "regressions.json", "retention.json", "time-to-complete.json"])
        #expect(panels.count >= 10)
        #expect(panels.allSatisfy { !$0.sql.contains("public.") })
        let datasource = try String(contentsOf: Self.grafanaDirectory.appendingPathComponent("provisioning/datasources/onramp.yaml"), encoding: .utf8)
        #expect(datasource.contains("user: onramp_analyst"))
    }

    @Test("every panel's SQL runs as onramp_analyst for every funnel and breakdown, and the main panels show data")
    func panelsRun() async throws {
        let session = try await AnalystSession.make()
        let from = Timestamps.format(microseconds: AnalystDataset.t0 - 7 * AnalystDataset.day)
        let to = Timestamps.format(microseconds: Timestamps.microseconds(Date()) + AnalystDataset.day)
        var executed = 0
        for panel in try Self.panels() {
            for sql in Self.queries(panel, from: from, to: to) {
                #expect(!sql.contains("$"), "\(panel.title): unexpanded variable")
                let result: QueryResult
                do { result = try await session.analyst.query(sql) } catch {
                    Issue.record("\(panel.dashboard) / \(panel.title): \(error)\n\(sql)")
                    continue
                }
                executed += 1
                // yoked persons have two platforms but no auth method or flow version to compare.
                let comparable = !panel.title.contains("vs the most common") || sql.contains("context.os.name")
                if sql.contains("yoked_onboarding"), !panel.title.contains("stuck"), comparable {
                    #expect(!result.rows.isEmpty, "\(panel.dashboard) / \(panel.title) is empty for yoked")
                }
            }
        }
        #expect(executed >= 40)
        // A number checked end to end: the trend panel's completion for yoked's cohort day is 2 of 4.
        let trend = try Self.panels().first { $0.dashboard == "completion-trend.json" && $0.sql.contains("completion_rate AS") }
        let sql = Self.expandMacros(try #require(trend).sql, from: from, to: to).replacingOccurrences(of: "$funnel", with: "yoked_onboarding")
        #expect(try await session.analyst.query(sql).first?.decode(Double.self, "completion") == 0.5)
        let target = try Self.panels().first { $0.dashboard == "completion-trend.json" && $0.sql.contains("AS \"target\"") }
        let targetSQL = Self.expandMacros(try #require(target).sql, from: from, to: to).replacingOccurrences(of: "$funnel", with: "yoked_onboarding")
        #expect(try await session.analyst.query(targetSQL).first?.decode(Double.self, "target") == 0.6)
        // The ad-hoc funnel in SQL, with its default steps (yoked's first three within a day),
        // reaches what the nightly job's yoked funnel reaches at those steps.
        let adHoc = try #require(try Self.panels().first { $0.title.contains("window_funnel") })
        var adHocSQL = Self.expandMacros(adHoc.sql, from: "2000-01-01T00:00:00Z", to: to)
        for (name, values) in adHoc.variables { adHocSQL = Self.substitute(adHocSQL, name, values.first ?? "") }
        let byPlatform = try await session.analyst.query(adHocSQL).table
        let reached = try await session.nightlyReach("yoked_onboarding", steps: 3)
        let totals = ["onboarding_started", "phone_entered", "otp_verified"].map { step in
            String(byPlatform.compactMap { Int($0[step] ?? "") }.reduce(0, +))
        }
        #expect(!byPlatform.isEmpty && totals == reached, "\(byPlatform) vs \(reached)")
        // The same three steps as a definition for analytics.funnel_report: the same reach, step by step.
        let reportPanel = try #require(try Self.panels().first { $0.title.contains("funnel_report") })
        var reportSQL = reportPanel.sql
        for (name, values) in reportPanel.variables { reportSQL = Self.substitute(reportSQL, name, values.first ?? "") }
        let steps = try await session.analyst.query(reportSQL).table
        #expect(steps.map { $0["persons"] ?? "" } == reached, "\(steps) vs \(reached)")
        // Retention over the range for forma: D7 of completers 3 of 3, of the others 1 of 3 (the dataset's forma persons).
        let retention = try Self.panels().first { $0.dashboard == "retention.json" && $0.title.contains("over the range") }
        let retentionSQL = Self.expandMacros(try #require(retention).sql, from: "2000-01-01T00:00:00Z", to: to)
            .replacingOccurrences(of: "$funnel", with: "forma_onboarding")
        let d7 = try await session.analyst.query(retentionSQL).table.first { $0["day"] == "D7" }
        #expect([d7?["completers_eligible"], d7?["completers_retained"], d7?["non_completers_eligible"], d7?["non_completers_retained"]]
                == ["3", "3", "3", "1"])
        try await session.close()
    }
}
