import Foundation
import Funnels

/// Number and duration formatting shared by the renderers.
public enum Formatting {
    static func percent(_ value: Double?, digits: Int = 1) -> String {
        guard let value, value.isFinite else { return "—" }
        return String(format: "%.\(digits)f%%", value * 100)
    }

    static func interval(_ rate: Rate) -> String {
        guard let ci = rate.ci95 else { return "—" }
        return "[\(percent(ci.lower))–\(percent(ci.upper))]"
    }

    /// `412.0` -> `6m 52s`; `90061` -> `1d 1h`.
    static func duration(_ seconds: Double?) -> String {
        guard let seconds, seconds.isFinite else { return "—" }
        let s = Int(seconds.rounded())
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m \(s % 60)s" }
        if s < 86_400 { return "\(s / 3600)h \(s % 3600 / 60)m" }
        return "\(s / 86_400)d \(s % 86_400 / 3600)h"
    }

    static func window(_ seconds: Int64) -> String {
        seconds % 3600 == 0 ? "\(seconds / 3600)h" : duration(Double(seconds))
    }

    static func target(_ t: TargetResult) -> String {
        let op: String
        let threshold: String
        let value: String
        switch t.bound {
        case .atLeast: op = "≥"
        case .atMost: op = "≤"
        }
        if t.name.contains("time") || t.name.contains("seconds") {
            threshold = duration(t.threshold)
            value = duration(t.value)
        } else {
            threshold = percent(t.threshold, digits: 0)
            value = percent(t.value)
        }
        return "\(t.met ? "met" : "MISSED") \(t.name): \(value) (target \(op) \(threshold))"
    }

    static func pad(_ s: String, _ width: Int, right: Bool = false) -> String {
        let count = s.count
        guard count < width else { return s }
        let fill = String(repeating: " ", count: width - count)
        return right ? fill + s : s + fill
    }

    /// `2026-11-28 20:18` (UTC): a time a person reads in a table.
    static func minute(_ microseconds: Int64) -> String {
        let seconds = ((microseconds / 1_000_000) % 86_400 + 86_400) % 86_400
        return CohortCalendar.day(of: microseconds, in: TimeZone(identifier: "UTC") ?? .gmt)
            + String(format: " %02d:%02d", seconds / 3600, seconds % 3600 / 60)
    }

    /// `2026-11-21T10:00:01.234567Z` (UTC; no fraction when whole): a time a tool reads, in CSV and JSON.
    static func instant(_ microseconds: Int64) -> String {
        let (days, rem) = microseconds.quotientAndRemainder(dividingBy: 86_400_000_000)
        let (day, us) = rem < 0 ? (days - 1, rem + 86_400_000_000) : (days, rem)
        let seconds = us / 1_000_000, fraction = us % 1_000_000
        return CohortCalendar.text(ofDay: day)
            + String(format: "T%02lld:%02lld:%02lld", seconds / 3600, seconds / 60 % 60, seconds % 60)
            + (fraction == 0 ? "" : String(format: ".%06lld", fraction)) + "Z"
    }

    /// Columns padded to their widest cell, `right` ones aligned right.
    static func columns(_ rows: [[String]], right: Set<Int> = []) -> String {
        var widths = [Int](repeating: 0, count: rows.first?.count ?? 0)
        for row in rows { for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) } }
        return rows.map { row in
            row.enumerated().map { i, cell in pad(cell, i < widths.count ? widths[i] : 0, right: right.contains(i)) }.joined(separator: "  ")
                .trimmingCharacters(in: .whitespaces) + "\n"
        }.joined()
    }

    /// A CSV field, RFC 4180 quoted when it needs to be.
    public static func csvField(_ field: String) -> String {
        guard field.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return field }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
