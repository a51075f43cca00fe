import LibPQ

/// Parses the timestamps clients send: RFC 3339 / ISO 8601 with a `T` or a
/// space, optional fraction (any number of digits, kept to microseconds) and
/// `Z` or a `±hh:mm` / `±hhmm` / `±hh` offset (`DateTimeText`'s grammar), the
/// zone required. Years outside 1970…9999 are refused, so later arithmetic
/// cannot overflow. Returns microseconds since the Unix epoch.
public enum RFC3339 {
    public static func parse(_ text: String) -> Int64? {
        guard (19...40).contains(text.utf8.count), let fields = DateTimeText.scan(text),
            fields.offsetSeconds != nil,  // RFC 3339 requires a zone
            (1970...9999).contains(fields.year)
        else { return nil }
        return fields.microseconds
    }
}
