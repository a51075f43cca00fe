import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection
import Simulation
import TestSupport
import Testing

/// The simulator's story (Android on yoked 2.3.0 fails OTP more often, and
/// those it fails send otp_failed before they leave) is what the drop-off
/// diagnostics find, unprompted: the top negative driver at the OTP
/// transition and the top next event of those who left there.
@Suite struct DropOffStoryTests {
    @Test("the diagnostics of simulated yoked traffic name otp_failed and Android at phone_entered → otp_verified")
    func findsTheStory() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let now = Date()
        let events = SimulatedHistory.events(count: 60_000, from: 16, seed: 2026, apps: ["yoked"], now: now)
        let configuration = bundledConfiguration
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        let reports = try await pool.withConnection { c in
            try EventSeeder.insert(c, events)
            _ = try job.run(c, mode: .rebuild)
            return try ReportQuery(funnels: ["yoked_onboarding"]).results(c, configuration: configuration, now: Timestamps.microseconds(now))
        }
        let d = try #require(reports.first?.report.diagnostics)
        let phone = try #require(d.steps.first { $0.name == "phone_entered" })
        let otp = d.drivers.filter { $0.from == phone.index && $0.to == phone.index + 1 }
        let negative = otp.filter { $0.oddsRatio < 1 }
        print("story: \(events.count) events; \(phone.dropped) dropped at phone_entered, next: "
              + phone.nextEvents.prefix(3).map { "\($0.label) \($0.persons) (\(String(format: "%.0f%%", $0.share * 100)))" }.joined(separator: ", "))
        for driver in negative.prefix(4) {
            print(String(format: "story: negative driver %@ %@: OR %.3f [%.3f, %.3f], p %.2e, q %.2e, %d persons",
                         driver.kind.rawValue, "\(driver.dimension.map { $0 + " = " } ?? "")\(driver.value)", driver.oddsRatio,
                         driver.ci95.lower, driver.ci95.upper, driver.pValue, driver.qValue, driver.persons))
        }
        #expect(phone.nextEvents.first?.label == "otp_failed")
        #expect(negative.first?.kind == .event && negative.first?.value == "otp_failed")
        #expect((negative.first?.qValue ?? 1) < 1e-6)
        // Android as a whole goes with leaving at the code; 2.3.0 as a whole is diluted by its iOS half
        // (and 2.1.0's older code entry, also worse), so only the event and the platform are asserted.
        let android = negative.first { $0.dimension == "context.os.name" && $0.value == "Android" }
        #expect(android.map { $0.qValue < 0.05 } == true, "Android drives drop-off at OTP")
        await pool.close()
        try await db.drop()
    }
}
