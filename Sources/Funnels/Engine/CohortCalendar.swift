import CivilDate
public import Foundation

/// Cuts timestamps into cohort days in a report time zone.
///
/// Days are computed from whole seconds with a Gregorian calendar so that a
/// person starting at 23:59:59.999999 local time stays on that day, and DST
/// days of 23 or 25 hours end where the wall clock says they do.
public enum CohortCalendar {
    /// `YYYY-MM-DD` of the local day containing `timestamp` (microseconds).
    ///
    /// The zone's offset at that instant shifts the time onto the local wall
    /// clock, then plain civil-date arithmetic names the day: the same answer as
    /// a Gregorian calendar, without its cost (this runs for every person).
    public static func day(of timestamp: Int64, in timeZone: TimeZone) -> String {
        text(ofDay: dayNumber(of: timestamp, in: timeZone))
    }

    /// The same local day as a count of days since 1970-01-01, the form a
    /// binary COPY stores a `date` in.
    public static func dayNumber(of timestamp: Int64, in timeZone: TimeZone) -> Int64 {
        let instant = date(timestamp)
        let local = Int64(instant.timeIntervalSince1970) + Int64(timeZone.secondsFromGMT(for: instant))
        return local >= 0 ? local / 86_400 : (local - 86_399) / 86_400
    }

    /// The day count of a `YYYY-MM-DD` text; nil when it is not one.
    public static func dayNumber(ofText text: String) -> Int64? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, let year = Int64(parts[0]), let month = Int64(parts[1]), let day = Int64(parts[2]),
              (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        return CivilDate.days(year: year, month: month, day: day)
    }

    /// Whether `text` is a day as written back (`2026-01-05`, never
    /// `2026-1-5`): cohort days are compared as text.
    public static func isDayText(_ text: String) -> Bool {
        dayNumber(ofText: text).map(text(ofDay:)) == text
    }

    /// The newest cohort day (a day count) whose every window has closed at
    /// `now`: the day before the one holding `now - window`, since a person
    /// starting at that day's last instant may still finish.
    public static func newestClosedDay(now: Int64, windowMicroseconds: Int64, in timeZone: TimeZone) -> Int64 {
        let (start, overflow) = now.subtractingReportingOverflow(windowMicroseconds)
        return dayNumber(of: overflow ? Int64.min / 2 : start, in: timeZone) - 1
    }

    /// `YYYY-MM-DD` of a day count since 1970-01-01.
    public static func text(ofDay days: Int64) -> String {
        let (year, month, day) = CivilDate.date(days: days)
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2)
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }

    /// Microseconds at which the local day containing `timestamp` ends.
    public static func endOfDay(containing timestamp: Int64, in timeZone: TimeZone) -> Int64 {
        let start = date(timestamp)
        let seconds = calendar(timeZone).dateInterval(of: .day, for: start)?.end.timeIntervalSince1970
            ?? (start.timeIntervalSince1970 / 86_400).rounded(.down) * 86_400 + 86_400
        let (value, overflow) = Int64(seconds.rounded(.down)).multipliedReportingOverflow(by: 1_000_000)
        return overflow ? Int64.max : value
    }

    private static func calendar(_ timeZone: TimeZone) -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        return calendar
    }

    /// Whole seconds (floored), so sub-second rounding never crosses midnight.
    private static func date(_ timestamp: Int64) -> Date {
        let seconds = timestamp / 1_000_000 - (timestamp % 1_000_000 < 0 ? 1 : 0)
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}
