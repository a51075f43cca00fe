import CivilDate
public import Foundation

/// Exact conversions between `timestamptz` text and microseconds since the Unix
/// epoch. PostgreSQL stores microseconds; going through `Date` (a Double) for
/// every row would both cost time and round, so the layer works in integers.
public enum Timestamps {
    /// Microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's epoch, which
    /// its binary `timestamptz` counts from.
    static let postgresEpochMicroseconds: Int64 = 946_684_800_000_000

    /// A binary `timestamptz` (eight bytes, microseconds since 2000) as
    /// microseconds since the Unix epoch, infinities as `Int64.max` and
    /// `.min` (as `parse` reads them); nil for a field of another size or
    /// out of range.
    static func binary(_ field: UnsafeRawBufferPointer) -> Int64? {
        guard field.count == 8 else { return nil }
        let value = Int64(bigEndian: field.loadUnaligned(as: Int64.self))
        guard value != .max, value != .min else { return value }
        let (moved, overflow) = value.addingReportingOverflow(postgresEpochMicroseconds)
        return overflow ? nil : moved
    }

    public static func microseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
    }

    public static func date(microseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(microseconds) / 1_000_000)
    }

    /// `2026-11-21T10:00:01.234567Z`, which PostgreSQL parses as timestamptz.
    public static func format(microseconds us: Int64) -> String {
        let (days, rem) = floorDivMod(us, 86_400_000_000)
        let (y, m, d) = CivilDate.date(days: days)
        let secondsOfDay = rem / 1_000_000
        let micros = rem % 1_000_000
        if (0...9999).contains(y) {
            // Fixed width, written as bytes: the server formats four per stored event.
            var out = [UInt8](repeating: UInt8(ascii: "0"), count: 27)
            func put(_ value: Int64, at end: Int, width: Int) {
                var v = value
                for k in 0..<width {
                    out[end - k] = UInt8(ascii: "0") + UInt8(v % 10)
                    v /= 10
                }
            }
            put(y, at: 3, width: 4)
            out[4] = UInt8(ascii: "-")
            put(m, at: 6, width: 2)
            out[7] = UInt8(ascii: "-")
            put(d, at: 9, width: 2)
            out[10] = UInt8(ascii: "T")
            put(secondsOfDay / 3600, at: 12, width: 2)
            out[13] = UInt8(ascii: ":")
            put(secondsOfDay / 60 % 60, at: 15, width: 2)
            out[16] = UInt8(ascii: ":")
            put(secondsOfDay % 60, at: 18, width: 2)
            out[19] = UInt8(ascii: ".")
            put(micros, at: 25, width: 6)
            out[26] = UInt8(ascii: "Z")
            return String(decoding: out, as: UTF8.self)
        }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(secondsOfDay / 3600, 2)):"
            + "\(pad(secondsOfDay / 60 % 60, 2)):\(pad(secondsOfDay % 60, 2)).\(pad(micros, 6))Z"
    }

    /// Parses the ISO output PostgreSQL gives for timestamptz with `DateStyle=ISO`
    /// (`2026-11-21 10:00:01.234+00`, offsets `+05:30` too). Nil if malformed.
    public static func parse(_ text: String) -> Int64? {
        var text = text  // native strings are read in place
        return text.withUTF8 { parse(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// `parse` of bytes as read (a COPY row's field), with no string made for them.
    public static func parse(bytes: UnsafeRawBufferPointer) -> Int64? {
        if bytes.elementsEqual("infinity".utf8) { return Int64.max }
        if bytes.elementsEqual("-infinity".utf8) { return Int64.min }
        return DateTimeText.scan(bytes.assumingMemoryBound(to: UInt8.self))?.microseconds
    }

    private static func floorDivMod(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let q = a / b
        let r = a % b
        return r < 0 ? (q - 1, r + b) : (q, r)
    }

    private static func pad(_ v: Int64, _ width: Int) -> String {
        let s = String(v)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}

/// The fields of an ISO 8601 date-time as written — `2026-11-21T10:00:01.234567+05:30`,
/// with `T`, `t` or a space between date and time, an optional fraction (any
/// number of digits, kept to microseconds) and an optional zone (`Z`, `z`,
/// `±hh`, `±hh:mm`, `±hhmm`) — checked to be a real date and time of day. One
/// scanner for PostgreSQL's output (`Timestamps.parse`) and the timestamps
/// clients send (`RFC3339.parse`), each adding its own rules.
public struct DateTimeText: Sendable {
    public var year: Int64
    public var month: Int64
    public var day: Int64
    public var hour: Int64
    public var minute: Int64
    public var second: Int64
    public var micros: Int64
    /// Seconds east of UTC; nil when the text names no zone.
    public var offsetSeconds: Int64?

    /// Microseconds since the Unix epoch, a missing zone read as UTC.
    public var microseconds: Int64 {
        let days = CivilDate.days(year: year, month: month, day: day)
        return (days * 86_400 + hour * 3600 + minute * 60 + second - (offsetSeconds ?? 0)) * 1_000_000 + micros
    }

    public static func scan(_ text: String) -> DateTimeText? {
        var text = text  // native strings are read in place, with no copy per call: the job parses one per event
        return text.withUTF8 { scan($0) }
    }

    static func scan(_ b: UnsafeBufferPointer<UInt8>) -> DateTimeText? {
        var i = 0
        func number(_ count: Int) -> Int64? {
            guard i + count <= b.count else { return nil }
            var v: Int64 = 0
            for k in 0..<count {
                let c = b[i + k]
                guard c >= 48, c <= 57 else { return nil }
                v = v * 10 + Int64(c - 48)
            }
            i += count
            return v
        }
        func expect(_ first: UInt8, or second: UInt8? = nil, or third: UInt8? = nil) -> Bool {
            guard i < b.count, b[i] == first || b[i] == second || b[i] == third else { return false }
            i += 1
            return true
        }
        guard let year = number(4), expect(45), let month = number(2), expect(45), let day = number(2),
            expect(84, or: 116, or: 32), let hour = number(2), expect(58), let minute = number(2), expect(58),
            let second = number(2)
        else { return nil }
        var micros: Int64 = 0
        if expect(46) {
            var digits = 0
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                if digits < 6 { micros = micros * 10 + Int64(b[i] - 48) }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 6) { micros *= 10 }
        }
        var offsetSeconds: Int64?
        if expect(90, or: 122) {
            offsetSeconds = 0
        } else if i < b.count {
            let sign: Int64 = b[i] == 45 ? -1 : 1
            guard expect(43, or: 45), let oh = number(2) else { return nil }
            var om: Int64 = 0
            if i < b.count {
                _ = expect(58)
                guard let v = number(2) else { return nil }
                om = v
            }
            guard oh < 24, om < 60 else { return nil }
            offsetSeconds = sign * (oh * 3600 + om * 60)
        }
        guard i == b.count, (1...12).contains(month), (1...daysIn(month, year)).contains(day), hour < 24, minute < 60,
            second < 61
        else { return nil }
        return DateTimeText(
            year: year, month: month, day: day, hour: hour, minute: minute, second: second, micros: micros, offsetSeconds: offsetSeconds)
    }

    private static func daysIn(_ month: Int64, _ year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}
