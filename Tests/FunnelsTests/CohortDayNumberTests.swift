import Foundation
import Funnels
import Testing

/// Outcome rows go to PostgreSQL in binary, where a cohort day is a day
/// number; its text, the tallies' key, must name the same day.
@Suite("cohort day numbers")
struct CohortDayNumberTests {
    @Test("a local day's number counts from 1970-01-01, and its text names the same day")
    func dayNumbers() throws {
        let utc = try #require(TimeZone(identifier: "UTC"))
        let newYork = try #require(TimeZone(identifier: "America/New_York"))
        let day: Int64 = 86_400_000_000
        #expect(CohortCalendar.dayNumber(of: 0, in: utc) == 0)
        #expect(CohortCalendar.dayNumber(of: 10_957 * day + day - 1, in: utc) == 10_957)  // 2000-01-01 23:59:59.999999
        #expect(CohortCalendar.dayNumber(of: -1, in: utc) == -1)  // 1969-12-31
        #expect(CohortCalendar.text(ofDay: 0) == "1970-01-01")
        #expect(CohortCalendar.text(ofDay: 10_957) == "2000-01-01")
        #expect(CohortCalendar.text(ofDay: 19_782) == "2024-02-29")
        #expect(CohortCalendar.text(ofDay: -1) == "1969-12-31")
        // 2026-11-22 03:30 UTC is still the 21st in New York.
        let lateEvening: Int64 = 1_795_318_200_000_000
        #expect(CohortCalendar.day(of: lateEvening, in: newYork) == "2026-11-21")
        #expect(CohortCalendar.dayNumber(of: lateEvening, in: newYork) == CohortCalendar.dayNumber(of: lateEvening, in: utc) - 1)
        for timestamp in stride(from: Int64(-3) * day, to: 3 * day, by: 3_600_000_000 * 7) {
            for zone in [utc, newYork] {
                #expect(
                    CohortCalendar.day(of: timestamp, in: zone)
                        == CohortCalendar.text(ofDay: CohortCalendar.dayNumber(of: timestamp, in: zone)))
            }
        }
    }
}
