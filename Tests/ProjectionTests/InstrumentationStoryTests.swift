import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection
import Simulation
import TestSupport
import Testing

/// A release that stopped sending a step's event is named as broken
/// instrumentation, and the drop it causes is not blamed on the users
/// (docs/tracking-health.md); stable traffic raises no finding. Counts are
/// checked against plain SQL over `analytics.events`.
@Suite struct InstrumentationStoryTests {
    /// The report of simulated traffic of `apps` with `plants`, rebuilt at `now`.
    static func report(
        _ db: TestDatabase, apps: Set<String>, plants: [PlantedRegression], seed: UInt64, now: Date
    ) async throws -> [FunnelReport] {
        let events = SimulatedHistory.events(count: 60_000, from: 42, seed: seed, apps: apps, plants: plants, now: now)
        let pool = db.pool(maxConnections: 1)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        await pool.close()
        let job = ProjectionJob(configuration: bundledConfiguration, showProgress: false)
        let run = try await NightlyRun.run(job, mode: .rebuild, query: ReportQuery(), databaseURL: db.url, now: Timestamps.microseconds(now))
        return run.results.map(\.report)
    }

    @Test("yoked 2.4.0 never sending otp_verified is an event that vanished in 2.4.0; the drop at that step and in completion is labelled instrumentation, and the counts equal plain SQL")
    func brokenRelease() async throws {
        let db = try await TestDatabase.create()
        let broken = try PlantedRegression.parseBreak("yoked:2.4.0:otp_verified").get()
        let reports = try await Self.report(db, apps: ["yoked"], plants: [broken], seed: 412, now: Date())
        let report = try #require(reports.first { $0.funnel == "yoked_onboarding" })
        for finding in report.instrumentation { print("instrumentation story: \(finding.sentence)") }
        for change in report.regressions.regressions { print("instrumentation story: regression \(change.step ?? change.metric.rawValue) \(change.kind) \(change.likelyInstrumentation == nil ? "users" : "instrumentation")") }
        let vanished = try #require(report.instrumentation.first { $0.kind == .eventVanished })
        #expect(vanished.step == "otp_verified" && vanished.baseline == "2.3.0" && vanished.recent == "2.4.0")
        #expect(vanished.labels == ["event: otp_verified"])
        #expect(report.instrumentation.allSatisfy { $0.step == "otp_verified" }, "\(report.instrumentation.map(\.sentence))")
        // The drop is there, and it is the tracking's.
        let atStep = report.regressions.regressions.filter { $0.step == "otp_verified" || $0.metric == .completionRate }
        #expect(atStep.contains { $0.kind == .version && $0.step == "otp_verified" })
        #expect(atStep.allSatisfy { $0.likelyInstrumentation != nil })

        // Against plain SQL over the analysts' view of the log.
        let pool = db.pool(maxConnections: 1)
        func scalar(_ sql: String) async throws -> Int { try await pool.query(sql).scalar(Int.self) }
        #expect(try await scalar("SELECT count(*) FROM analytics.events WHERE app = 'yoked' AND event = 'otp_verified' AND app_version = '2.4.0'") == 0)
        #expect(vanished.baselineEvents == (try await scalar(
            "SELECT count(*) FROM analytics.events WHERE app = 'yoked' AND event = 'otp_verified' AND app_version = '2.3.0'")))
        #expect(vanished.recentStarters == (try await scalar(
            """
            SELECT sum(n)::int8 FROM (
                SELECT count(DISTINCT COALESCE(user_id, anonymous_id)) AS n FROM analytics.events
                WHERE app = 'yoked' AND event = 'onboarding_started' AND app_version = '2.4.0'
                GROUP BY ("timestamp" AT TIME ZONE 'UTC')::date, os_name) x
            """)))
        // What the report found is what analysts read.
        let stored = try await pool.query("SELECT kind, step, baseline, recent FROM analytics.funnel_instrumentation WHERE funnel = 'yoked_onboarding'").rows
            .map { row in (0..<4).map { row.text(at: $0) ?? "" } }
        #expect(stored.contains(["event_vanished", "otp_verified", "2.3.0", "2.4.0"]))
        let labelled = try await scalar(
            "SELECT count(*) FROM analytics.funnel_regressions WHERE funnel = 'yoked_onboarding' AND step = 'otp_verified' AND likely_instrumentation IS NOT NULL")
        #expect(labelled >= 1)
        await pool.close()
        try await db.drop()
    }

    @Test("stable traffic of every app, with its stories, raises no instrumentation finding")
    func stableTraffic() async throws {
        let db = try await TestDatabase.create()
        let reports = try await Self.report(db, apps: ["yoked", "ops", "umuve", "forma"], plants: [], seed: 7, now: Date())
        let findings = reports.flatMap(\.instrumentation)
        #expect(findings.isEmpty, "\(findings.map(\.sentence))")
        // The versions were compared, so the check had something to look at.
        let compared = reports.filter { $0.regressions.tested.contains { $0.kind == .version } }.map(\.funnel)
        #expect(compared.count >= 3, "\(compared)")
        #expect(reports.flatMap(\.regressions.tested).allSatisfy { $0.likelyInstrumentation == nil })
        try await db.drop()
    }
}
