import Foundation
import Funnels
import LibPQ
import TestSupport
import Testing

/// Every sql/examples query, run as the role it is written for, on the
/// hand-made dataset, with its answer checked.
@Suite("sql/examples as onramp_analyst", .serialized)
struct ExampleQueriesTests {
    @Test("every example file is covered by a check here")
    func everyExampleIsChecked() throws {
        let files = try FileManager.default.contentsOfDirectory(
            atPath: AnalystSession.sqlDirectory.appendingPathComponent("examples").path
        ).filter { $0.hasSuffix(".sql") }.sorted()
        #expect(files.count >= 8)
        #expect(files == Self.checked)
    }

    static let checked = [
        "01_yoked_dropoff_by_app_version.sql", "02_yoked_median_otp_to_profile.sql", "03_ops_stuck_at_company_details.sql",
        "04_ops_employee_flow_version_comparison.sql", "05_ops_completion_by_signup_method.sql",
        "06_daily_completion_trend.sql", "07_events_per_platform_per_day.sql", "08_umuve_skip_or_swipe.sql",
        "09_operator_quarantine_by_reason.sql", "10_yoked_what_otp_dropoffs_did_next.sql",
        "11_yoked_app_versions_driving_profile_dropoff.sql", "12_forma_d7_retention_by_app_version.sql",
        "13_what_each_funnel_was_built_from.sql", "14_any_funnel_in_sql.sql",
        "15_any_funnel_report_in_sql.sql", "16_yoked_who_dropped_at_phone_entered.sql",
    ]

    @Test("the examples give the answers the dataset implies")
    func answers() async throws {
        let session = try await AnalystSession.make()
        let analyst = session.analyst
        func run(_ file: String) async throws -> [[String: String]] {
            try await analyst.query(try AnalystSession.example(file)).table
        }

        // 01: y2 (2.2.0) stops at phone_entered, y3 (2.3.0) at profile_created.
        let dropoff = try await run("01_yoked_dropoff_by_app_version.sql")
        func row(_ version: String, _ step: String) -> [String: String]? {
            dropoff.first { $0["app_version"] == version && $0["step_name"] == step }
        }
        #expect(row("2.2.0", "onboarding_started")?["reached"] == "2")
        #expect(row("2.2.0", "phone_entered")?["dropped_here"] == "1")
        #expect(row("2.2.0", "otp_verified")?["reached"] == "1")
        #expect(row("2.3.0", "profile_created")?["dropped_here"] == "1")
        #expect(row("2.3.0", "onboarding_completed")?["reached"] == "1")
        #expect(dropoff.count == 24)

        // 02: otp -> profile took 120 s (y1), 300 s (y3), 600 s (y4).
        let otp = try await run("02_yoked_median_otp_to_profile.sql")
        #expect(otp.count == 1)
        #expect(otp.first?["persons"] == "3")
        #expect(Double(otp.first?["median_seconds"] ?? "") == 300)
        #expect(Double(otp.first?["p90_seconds"] ?? "") == 540)

        // 03: c1 is stuck for three days; c2 reached the screen two hours ago; c3 finished.
        let stuck = try await run("03_ops_stuck_at_company_details.sql")
        #expect(stuck.map { $0["person_id"] } == ["c1"])

        // 04: v2 3/10, v3 8/10: +0.5, p from the same test the engine uses.
        let comparison = try await run("04_ops_employee_flow_version_comparison.sql")
        let v3 = try #require(comparison.first)
        #expect(v3["version"] == "v3" && v3["started"] == "10" && v3["completed"] == "8")
        #expect(abs((Double(v3["difference_vs_v2"] ?? "") ?? 0) - 0.5) < 1e-12)
        let engine = try #require(Statistics.twoProportionZTest(successes1: 8, trials1: 10, successes2: 3, trials2: 10))
        #expect(abs((Double(v3["p_value"] ?? "") ?? -1) - engine.pValue) < 1e-6)
        let wilson = try #require(Statistics.wilson(successes: 8, trials: 10))
        #expect(abs((Double(v3["ci_low"] ?? "") ?? -1) - wilson.lower) < 1e-12)
        #expect(abs((Double(v3["ci_high"] ?? "") ?? -1) - wilson.upper) < 1e-12)

        // 05: completion per auth method, counted straight from the dataset definition.
        let byMethod = try await run("05_ops_completion_by_signup_method.sql")
        for method in ["apple", "email", "google"] {
            let members = (1...20).filter { AnalystDataset.employeeAuth($0) == method }
            let done = members.filter(AnalystDataset.employeeCompletes)
            let r = byMethod.first { $0["auth_method"] == method }
            #expect(r?["started"] == "\(members.count)", "\(method)")
            #expect(r?["completed"] == "\(done.count)", "\(method)")
        }

        // 06: yoked's cohort: 4 started, 2 completed, window closed.
        let trend = try await run("06_daily_completion_trend.sql")
        let yokedDay = Timestamps.format(microseconds: AnalystDataset.t0).prefix(10)
        let yoked = trend.first { $0["funnel"] == "yoked_onboarding" && $0["cohort_day"] == String(yokedDay) }
        #expect(yoked?["started"] == "4" && yoked?["completed"] == "2" && yoked?["completion_rate"] == "0.5000")
        #expect(yoked?["window_open"] == "f")
        #expect(trend.contains { $0["funnel"] == "ops_company_creator" && $0["window_open"] == "t" })

        // 07: events per app, day and platform match what was written.
        let perPlatform = try await run("07_events_per_platform_per_day.sql")
        let dataset = AnalystDataset()
        var expected: [String: Int] = [:]
        for e in dataset.events {
            let os = e.context.contains("Android") ? "Android" : (e.context.contains("macOS") ? "macOS" : "iOS")
            expected["\(e.app)|\(Timestamps.format(microseconds: e.timestamp).prefix(10))|\(os)", default: 0] += 1
        }
        var actual: [String: Int] = [:]
        for r in perPlatform { actual["\(r["app"] ?? "")|\(r["day"] ?? "")|\(r["os_name"] ?? "")"] = Int(r["events"] ?? "") }
        #expect(actual == expected)

        // 08: two skippers (one signs in), one swiper (signs in).
        let branches = try await run("08_umuve_skip_or_swipe.sql")
        #expect(branches.map { [$0["branch"] ?? "", $0["persons"] ?? "", $0["signed_in"] ?? ""] } == [["skipped", "2", "1"], ["swiped", "1", "1"]])

        // 10: y2 left at phone_entered; the first thing after was otp_failed.
        let next = try await run("10_yoked_what_otp_dropoffs_did_next.sql")
        #expect(next.map { [$0["did_next"] ?? "", $0["persons"] ?? "", $0["share"] ?? ""] } == [["otp_failed", "1", "1.0000"]])

        // 11: at profile_created, y1 (2.3.0) and y4 (2.2.0) went on, y3 (2.3.0) left: 2.3.0 goes with dropping off.
        // 2.3.0: a=1 b=1 c=1 d=0 -> (1.5·0.5)/(1.5·1.5); 2.2.0: a=1 b=0 c=1 d=1 -> (1.5·1.5)/(0.5·1.5).
        let versions = try await run("11_yoked_app_versions_driving_profile_dropoff.sql")
        #expect(versions.map { [$0["app_version"] ?? "", $0["persons"] ?? "", $0["converted"] ?? "", $0["dropped"] ?? ""] }
                == [["2.3.0", "2", "1", "1"], ["2.2.0", "1", "1", "0"]])
        #expect(versions.map { Double($0["odds_ratio"] ?? "") } == [0.3333, 3.0])
        let spread = 1.959963984540054 * (1 / 1.5 + 1 / 1.5 + 1 / 1.5 + 1 / 0.5).squareRoot()
        #expect(abs((Double(versions.first?["ci_low"] ?? "") ?? 0) - (exp(log(1.0 / 3) - spread) * 10_000).rounded() / 10_000) < 1e-9)

        // 12: D7 of forma's completers and the others, by version: 1.0.3 2 of 2 against 1 of 2 (f5 never came
        // back, f6 did), 1.0.2 1 of 1 against 0 of 1 (f4 came back on day 1 only).
        let retention = try await run("12_forma_d7_retention_by_app_version.sql")
        #expect(retention.map { [$0["app_version"] ?? "", $0["completers"] ?? "", $0["completers_retained"] ?? "",
                                 $0["non_completers"] ?? "", $0["non_completers_retained"] ?? "", $0["difference"] ?? ""] }
                == [["1.0.3", "2", "2", "2", "1", "0.5000"], ["1.0.2", "1", "1", "1", "0", "1.0000"]])
        let pD7 = try #require(Statistics.twoProportionZTest(successes1: 2, trials1: 2, successes2: 1, trials2: 2))
        #expect(abs((Double(retention.first?["p_value"] ?? "") ?? -1) - pD7.pValue) < 1e-6)

        // 13: the six bundled funnels, as configured.
        let built = try await run("13_what_each_funnel_was_built_from.sql")
        #expect(built.map { $0["funnel"] ?? "" } == [
            "forma_onboarding", "ops_companies", "ops_company_creator", "ops_employee", "umuve_onboarding", "yoked_onboarding",
        ])
        #expect(built.allSatisfy {
            $0["window_seconds"] == ($0["funnel"] == "ops_companies" ? "259200" : "86400") && $0["time_zone"] == "UTC" && $0["fingerprint"]?.count == 16
        })
        #expect(built.first { $0["funnel"] == "umuve_onboarding" }?["steps"]
                == "onboarding_screen_viewed → onboarding_screen_viewed | onboarding_skipped → apple_sign_in_completed → main_screen_viewed")

        // 14: the first three steps within a day, in SQL, reach what the nightly job's
        // 24 h yoked funnel reaches at those steps (a prefix of a funnel reaches what it does).
        let inSQL = try await run("14_any_funnel_in_sql.sql")
        let nightly = try await session.nightlyReach("yoked_onboarding", steps: 3)
        func total(_ column: String) -> String { String(inSQL.compactMap { Int($0[column] ?? "") }.reduce(0, +)) }
        #expect(!inSQL.isEmpty)
        #expect([total("started"), total("phone_entered"), total("otp_verified")] == nightly)

        // 15: the yoked funnel, given as JSON, reaches at every step what the nightly job's
        // configured yoked funnel reaches, and drops off where it does.
        let report = try await run("15_any_funnel_report_in_sql.sql")
        #expect(report.map { $0["persons"] ?? "" } == (try await session.nightlyReach("yoked_onboarding", steps: 12)))
        #expect(report.map { $0["step_name"] ?? "" } == AnalystDataset.yokedSteps)
        let nightlyDropOff = try await analyst.query(
            "SELECT sum(drop_off)::text AS d FROM analytics.funnel_daily WHERE funnel = 'yoked_onboarding' GROUP BY step_index ORDER BY step_index"
        ).table.map { $0["d"] ?? "" }
        #expect(report.map { $0["drop_off"] ?? "" } == nightlyDropOff)

        // 16: the persons of the report's drop-off at phone_entered, and what the night stored for them, in plain SQL.
        let dropped = try await run("16_yoked_who_dropped_at_phone_entered.sql")
        let stored = try await session.admin.query(
            """
            SELECT person_id FROM funnel_persons
            WHERE funnel = 'yoked_onboarding' AND level = 2 AND NOT completed AND NOT in_progress AND NOT excluded
            ORDER BY step_times_us[2] DESC, person_id
            """
        ).rows.compactMap { $0.text(at: 0) }
        #expect(dropped.map { $0["person_id"] ?? "" } == stored && !stored.isEmpty, "\(dropped)")
        #expect(dropped.allSatisfy { ($0["ids"] ?? "").hasPrefix("{\($0["person_id"] ?? "")") })

        // 09 is the operator's: the analyst is refused, the operator sees the reasons.
        let refused = await #expect(throws: PostgresError.self) { try await run("09_operator_quarantine_by_reason.sql") }
        #expect(refused?.sqlState == SQLState.insufficientPrivilege)
        let quarantine = try await session.operatorPool.query(try AnalystSession.example("09_operator_quarantine_by_reason.sql")).table
        #expect(quarantine.map { [$0["app"] ?? "", $0["reason_code"] ?? "", $0["messages"] ?? ""] }
                == [["yoked", "invalid_timestamp", "2"], ["ops", "missing_identity", "1"]])
        try await session.close()
    }
}
