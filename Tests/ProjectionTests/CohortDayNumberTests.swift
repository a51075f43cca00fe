import LibPQ
@testable import Projection
import Testing

/// Outcome rows go to PostgreSQL in binary, where a cohort day is a day number.
@Suite("cohort day numbers")
struct CohortDayNumberTests {
    @Test("a cohort day's text gives its day number; anything else is refused")
    func dayNumbers() {
        #expect(OutcomeStore.epochDays(of: "1970-01-01") == 0)
        #expect(OutcomeStore.epochDays(of: "2000-01-01") == 10_957)
        #expect(OutcomeStore.epochDays(of: "2024-02-29") == Timestamps.days(fromCivil: 2024, 2, 29))
        #expect(OutcomeStore.epochDays(of: "1969-12-31") == -1)
        for bad in ["", "2026", "2026-11", "2026-13-01", "2026-00-10", "2026-11-32", "2026-11-2x", "2026-11-21-", "-2026-11-21",
                    "99999999999-01-01"] {
            #expect(OutcomeStore.epochDays(of: bad) == nil, "\(bad)")
        }
    }
}
