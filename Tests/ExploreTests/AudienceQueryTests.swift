import Explore
import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection
import TestSupport
import Testing

/// Audiences at query time (docs/audiences.md, "Breaking a funnel down by
/// one"): a funnel broken down by an audience, and counted only for the
/// persons in or not in one, from the members the job last kept; against
/// the nightly job's report of the same funnel at the same clock, and the
/// members the events themselves give.
@Suite("audiences at query time, on a real PostgreSQL", .serialized)
struct AudienceQueryTests {
    static let yaml = AudienceReference.signupConfiguration.replacingOccurrences(of: "audiences:\n", with: AudienceReference.verifiedFunnel + """
        audiences:
          - {name: stalled, funnel: signup, stalled: {step: 2, for: 1h}}
          - {name: helped_lately, app: yoked, did: {event: help_opened, within: 6h}}

        """)

    static let hour: Int64 = 3_600_000_000

    @Test("a breakdown by audience equals the night's; --audience and --not-audience split the persons as the members do")
    func breakdownAndFilters() async throws {
        let configuration = try FunnelConfiguration.parse(yaml: Self.yaml, source: "audiences.yaml")
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("audience-query-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        var rng = SplitMix(seed: 72)
        let clock = (Timestamps.microseconds(Date()) / Self.hour - 24) * Self.hour
        var events: [SeedEvent] = []
        for round in 0..<3 {
            let (now, late) = AudienceReference.signupRound(&rng, round: round, clock: clock - Int64(2 - round) * 4 * Self.hour, hours: 4)
            events += now + late
        }
        let inserted = events
        try await pool.withConnection { c in try EventSeeder.insert(c, inserted) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental, now: clock) }
        let members = AudienceReference.members(events, configuration: configuration, now: clock)
        let stalled = Set(members.filter { $0.hasPrefix("stalled|") }.map { String($0.dropFirst("stalled|".count)) })
        #expect(stalled.count > 3)

        // Broken down: the night's report of the same funnel at the same clock.
        let explorer = Explorer(cacheRoot: cache)
        let verified = try #require(configuration.funnel(named: "verified"))
        var broken = FunnelQuery(funnel: verified, timeZone: "UTC", now: clock)
        broken.diagnostics = true
        broken.retention = true
        let answer = try await pool.withConnection { [broken] c in try explorer.answer(broken, on: c) }
        let nightly = try await pool.withConnection { c in
            try ReportQuery(funnels: ["verified"]).results(c, configuration: configuration, now: clock)
        }
        #expect(nightly.first?.report == answer.report)
        let values = answer.report.breakdown("audience:stalled")?.values.map(\.value).sorted()
        #expect(values == ["in", "not in"])

        // Filtered: the signup funnel's starters split into the stalled and the others.
        let signup = try #require(configuration.funnel(named: "signup"))
        var whole = FunnelQuery(funnel: signup, timeZone: "UTC", now: clock)
        let all = try await pool.withConnection { [whole] c in try explorer.answer(whole, on: c) }
        whole.audiences = AudienceFilter(within: ["stalled"])
        let inside = try await pool.withConnection { [whole] c in try explorer.answer(whole, on: c) }
        whole.audiences = AudienceFilter(outside: ["stalled"])
        let outside = try await pool.withConnection { [whole] c in try explorer.answer(whole, on: c) }
        #expect(inside.report.started == stalled.count)
        #expect(inside.report.steps[1].persons == stalled.count)  // every one of them reached step 2
        #expect(inside.report.completed == 0)
        #expect(inside.report.started + outside.report.started == all.report.started)
        #expect(inside.report.completed + outside.report.completed == all.report.completed)

        // Two hours on, the members move (a wait passes, help grows old): the same question is counted again, not reused.
        _ = try await pool.withConnection { c in try job.runAudiences(c, now: clock + 2 * Self.hour) }
        let later = AudienceReference.members(events, configuration: configuration, now: clock + 2 * Self.hour)
        let stalledLater = later.filter { $0.hasPrefix("stalled|") }.count
        #expect(stalledLater != stalled.count)
        whole.audiences = AudienceFilter(within: ["stalled"])
        let again = try await pool.withConnection { [whole] c in try explorer.answer(whole, on: c) }
        #expect(!again.reusedAnswer)
        #expect(again.report.started == stalledLater)
        let same = try await pool.withConnection { [whole] c in try explorer.answer(whole, on: c) }
        #expect(same.reusedAnswer && same.report == again.report)

        // An audience the log's app has none of is refused naming it.
        whole.audiences = AudienceFilter(within: ["nobody"])
        await #expect(throws: ExploreError.unknownAudience("nobody", app: "yoked")) {
            try await pool.withConnection { [whole] c in try explorer.answer(whole, on: c) }
        }
        await pool.close()
        try await db.drop()
    }
}
