import Funnels
import Testing

@Suite struct RetentionCountsTests {
    static let day = RetentionSettings.dayMicroseconds

    @Test("retention days are [t1 + N·24 h, t1 + (N+1)·24 h), only configured ones, only active events")
    func retainedDays() {
        let settings = RetentionSettings(days: [0, 1, 7], activeEvents: [.event("opened")])
        func opened(_ t: Int64) -> FunnelEvent { FunnelEvent(messageId: "\(t)", kind: .track, name: "opened", timestamp: t) }
        let start: Int64 = 1_000
        #expect(settings.retainedDays(start: start, events: [opened(start - 1)]) == [])
        #expect(settings.retainedDays(start: start, events: [opened(start)]) == [0])
        #expect(settings.retainedDays(start: start, events: [opened(start + Self.day - 1), opened(start + 2 * Self.day)]) == [0])
        #expect(settings.retainedDays(start: start, events: [opened(start + 8 * Self.day - 1), opened(start + Self.day)]) == [1, 7])
        let screen = FunnelEvent(messageId: "s", kind: .screen, name: "opened", timestamp: start + Self.day)
        #expect(settings.retainedDays(start: start, events: [screen]) == [])
        #expect(RetentionSettings().retainedDays(start: start, events: [screen]) == [1])
    }

    @Test("counts add and subtract as multisets, and are read at a time: eligible once t1 + (N+1)·24 h is before it")
    func cells() {
        var counts = RetentionCounts()
        counts.add(start: 0, completed: true, retainedDays: [1])
        counts.add(start: 0, completed: true, retainedDays: [])
        counts.add(start: Self.day, completed: false, retainedDays: [1])
        var removed = RetentionCounts()
        removed.add(start: 0, completed: true, retainedDays: [])
        var less = counts
        less.subtract(removed)
        #expect(less.completers.starts == [0] && less.completers.retained[1] == [0])
        let at = { (now: Int64) in counts.cells(days: [1], now: now) }
        #expect(at(2 * Self.day) == [
            RetentionCell(day: 1, completed: true, counts: RetentionSide(eligible: 0, retained: 0, pending: 2), nextEligibleAfter: 2 * Self.day),
            RetentionCell(day: 1, completed: false, counts: RetentionSide(eligible: 0, retained: 0, pending: 1), nextEligibleAfter: 3 * Self.day),
        ])
        #expect(at(2 * Self.day + 1)[0].counts == RetentionSide(eligible: 2, retained: 1, pending: 0))
        let report = RetentionReport(days: [1], cells: ["2026-01-01": at(4 * Self.day)])
        #expect(report.days[0].difference == 0.5 - 1)
        #expect(!report.days[0].isPending)
        #expect(RetentionReport(days: [1], cells: ["2026-01-01": at(0)]).days[0].isPending)
    }
}
