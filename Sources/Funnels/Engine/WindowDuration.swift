import Foundation

/// Parses conversion windows such as `24h`, `30m`, `90s`, `2d` or a plain
/// integer number of seconds, so configs read like the product spec does.
public enum WindowDuration {
    /// Whole seconds, or `nil` when the text is not a positive duration.
    public static func seconds(from text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard let unit = trimmed.last else { return nil }
        let multiplier: Int64
        let digits: Substring
        switch unit {
        case "s": multiplier = 1; digits = trimmed.dropLast()
        case "m": multiplier = 60; digits = trimmed.dropLast()
        case "h": multiplier = 3_600; digits = trimmed.dropLast()
        case "d": multiplier = 86_400; digits = trimmed.dropLast()
        default: multiplier = 1; digits = Substring(trimmed)
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
              let count = Int64(digits), count > 0 else { return nil }
        let (total, overflow) = count.multipliedReportingOverflow(by: multiplier)
        // Keep room for the microsecond conversion and timestamp arithmetic.
        guard !overflow, total <= 100 * 366 * 86_400 else { return nil }
        return total
    }
}
