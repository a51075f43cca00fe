/// What retention (docs/funnels.md, "Retention") counts for a funnel: the days after a person's
/// start to look at, and which events show the person came back.
///
/// A person is retained on day N when an active event's time falls in
/// `[t_1 + N·24 h, t_1 + (N+1)·24 h)`, `t_1` their start (the first step-1
/// event), and is eligible for day N once `t_1 + (N+1)·24 h` is before the run.
public struct RetentionSettings: Sendable, Hashable {
    /// The days a funnel names none.
    public static let defaultDays = [1, 7, 30]
    /// The longest retention day a funnel may ask for.
    public static let maximumDay = 3_650
    /// A retention day, in the unit of `FunnelEvent.timestamp`.
    public static let dayMicroseconds: Int64 = 86_400_000_000

    /// Ascending and distinct, each from 0 to `maximumDay`.
    public var days: [Int] {
        didSet { lookup = Self.lookup(days) }
    }
    /// Events that show activity; empty: any event of the app.
    public var activeEvents: [EventMatcher]
    /// `lookup[n]` holds whether day n is one of `days`.
    private var lookup: [Bool]

    public init(days: [Int] = RetentionSettings.defaultDays, activeEvents: [EventMatcher] = []) {
        self.days = days
        self.activeEvents = activeEvents
        lookup = Self.lookup(days)
    }

    private static func lookup(_ days: [Int]) -> [Bool] {
        var lookup = [Bool](repeating: false, count: (days.max() ?? -1) + 1)
        for day in days where day >= 0 { lookup[day] = true }
        return lookup
    }

    /// Whether `event` shows activity.
    public func isActive(_ event: FunnelEvent) -> Bool {
        activeEvents.isEmpty || activeEvents.contains { $0.matches(event) }
    }

    /// The configured retention day an activity at `timestamp` falls on for a
    /// person who started at `start`, if any.
    public func day(of timestamp: Int64, start: Int64) -> Int? {
        guard timestamp >= start else { return nil }
        let (elapsed, overflow) = timestamp.subtractingReportingOverflow(start)
        guard !overflow else { return nil }
        let day = elapsed / Self.dayMicroseconds
        guard day < Int64(lookup.count), lookup[Int(day)] else { return nil }
        return Int(day)
    }

    /// The configured days, ascending, on which `events` show a person who
    /// started at `start` active.
    public func retainedDays(start: Int64, events: [FunnelEvent]) -> [Int] {
        var found = [Bool](repeating: false, count: lookup.count)
        var count = 0
        for event in events {
            guard let day = day(of: event.timestamp, start: start), !found[day], isActive(event) else { continue }
            found[day] = true
            count += 1
            if count == days.count { break }
        }
        return days.filter { found[$0] }
    }

    /// The moment from which a person who started at `start` is eligible for
    /// day `day`: eligible at a run whose time is strictly later.
    public static func eligibleAfter(start: Int64, day: Int) -> Int64 {
        let (span, overflow) = Int64(day + 1).multipliedReportingOverflow(by: dayMicroseconds)
        let (end, overflow2) = start.addingReportingOverflow(span)
        return overflow || overflow2 ? Int64.max : end
    }

    /// Every path `where` filters of the active events read.
    public var referencedPaths: Set<String> {
        Set(activeEvents.flatMap(\.conditions.keys))
    }
}
