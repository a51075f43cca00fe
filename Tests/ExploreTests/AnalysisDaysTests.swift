import Explore
import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection
import TestSupport
import Testing

/// An analysis's days at query time are those someone counted for, as the
/// nightly job stores them: a cohort day whose every window is still open
/// has no retention row.
@Suite struct AnalysisDaysTests {
    @Test("retention at query time leaves out a day whose windows are all open, as the nightly report does")
    func openDaysHaveNoRetention() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("explore-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let hour: Int64 = 3_600_000_000, day = 24 * hour
        let first = (Timestamps.microseconds(Date()) / day - 5) * day + 10 * hour
        let now = first + 3 * day + 12 * hour
        var events: [SeedEvent] = []
        // Three persons three days before the clock, their windows closed; two of them back a day later.
        for p in 0..<3 {
            events.append(SeedEvent(app: "x", event: "start", anonymousId: "a\(p)", timestamp: first + Int64(p) * 60_000_000))
            if p < 2 { events.append(SeedEvent(app: "x", event: "finish", anonymousId: "a\(p)", timestamp: first + hour)) }
            if p > 0 { events.append(SeedEvent(app: "x", event: "other", anonymousId: "a\(p)", timestamp: first + day + hour)) }
        }
        // One person an hour before the clock: their window is open.
        events.append(SeedEvent(app: "x", event: "start", anonymousId: "late", timestamp: now - hour))
        let seeded = events
        try await pool.withConnection { c in try EventSeeder.insert(c, seeded) }

        let funnel = try FunnelConfiguration.parseFunnel(
            yaml: "{name: f, app: x, window: 24h, steps: [{event: start}, {event: finish}]}", source: "test")
        var query = FunnelQuery(funnel: funnel, timeZone: "UTC", now: now)
        query.retention = true
        let asked = query
        let answer = try await pool.withConnection { c in try Explorer(cacheRoot: cache).answer(asked, on: c) }
        let configuration = FunnelConfiguration(reportTimeZone: "UTC", apps: [AppConfiguration(name: "x")], funnels: [funnel])
        let nightly = try await pool.withConnection { c in
            _ = try ProjectionJob(configuration: configuration, showProgress: false).run(c, mode: .rebuild, now: now)
            return try ReportQuery().results(c, configuration: configuration, now: now).first?.report
        }
        let days = answer.report.retention?.cohorts.map(\.day) ?? []
        #expect(days == [CohortCalendar.day(of: first, in: .gmt)], "\(days)")
        #expect(answer.report.retention == nightly?.retention)
        await pool.close()
        try await db.drop()
    }
}
