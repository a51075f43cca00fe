import LibPQ

/// Parses the timestamps clients send: RFC 3339 / ISO 8601 with a `T` or a
/// space, optional fraction (any number of digits, kept to microseconds) and
/// `Z` or a `±hh:mm` / `±hhmm` offset. Years outside 1970…9999 are refused, so
/// later arithmetic cannot overflow. Returns microseconds since the Unix epoch.
public enum RFC3339 {
    public static func parse(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count >= 19, b.count <= 40 else { return nil }
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
        func expect(_ chars: Set<UInt8>) -> Bool {
            guard i < b.count, chars.contains(b[i]) else { return false }
            i += 1
            return true
        }
        guard let year = number(4), expect([45]), let month = number(2), expect([45]), let day = number(2),
            expect([84, 116, 32]), let hour = number(2), expect([58]), let minute = number(2), expect([58]),
            let second = number(2)
        else { return nil }
        var micros: Int64 = 0
        if i < b.count, b[i] == 46 {
            i += 1
            var digits = 0
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                if digits < 6 { micros = micros * 10 + Int64(b[i] - 48) }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 6) { micros *= 10 }
        }
        var offsetSeconds: Int64 = 0
        guard i < b.count else { return nil }  // RFC 3339 requires a zone
        if b[i] == 90 || b[i] == 122 {
            i += 1
        } else {
            let sign: Int64 = b[i] == 45 ? -1 : 1
            guard expect([43, 45]), let oh = number(2) else { return nil }
            var om: Int64 = 0
            if i < b.count, b[i] == 58 { i += 1 }
            if i < b.count {
                guard let v = number(2) else { return nil }
                om = v
            }
            guard oh < 24, om < 60 else { return nil }
            offsetSeconds = sign * (oh * 3600 + om * 60)
        }
        guard i == b.count, (1970...9999).contains(year), (1...12).contains(month), (1...daysIn(month, year)).contains(day),
            hour < 24, minute < 60, second < 61
        else { return nil }
        let days = Timestamps.days(fromCivil: year, month, day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return seconds * 1_000_000 + micros
    }

    private static func daysIn(_ month: Int64, _ year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}
