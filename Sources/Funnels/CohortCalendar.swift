public import Foundation

/// Cuts timestamps into cohort days in a report time zone.
///
/// Days are computed from whole seconds with a Gregorian calendar so that a
/// person starting at 23:59:59.999999 local time stays on that day, and DST
/// days of 23 or 25 hours end where the wall clock says they do.
public enum CohortCalendar {
    /// `YYYY-MM-DD` of the local day containing `timestamp` (microseconds).
    public static func day(of timestamp: Int64, in timeZone: TimeZone) -> String {
        let components = calendar(timeZone).dateComponents([.year, .month, .day], from: date(timestamp))
        let year = components.year ?? 1970, month = components.month ?? 1, day = components.day ?? 1
        return String(format: "%04d-%02d-%02d", year, month, day)
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
