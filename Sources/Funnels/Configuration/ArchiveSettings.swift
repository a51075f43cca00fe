/// How long the log keeps events, and where older months go
/// (docs/lifecycle.md): `archive: {keep_events: 13 months, directory: PATH}`.
/// Absent, the log keeps everything.
public struct ArchiveSettings: Sendable, Hashable {
    /// How long events stay in the log, in whole months or days.
    public enum Keep: Sendable, Hashable, CustomStringConvertible {
        case months(Int)
        case days(Int)

        /// The fewest days it can mean: a month counts 28.
        public var leastDays: Int {
            switch self {
            case .months(let months): months * 28
            case .days(let days): days
            }
        }

        public var description: String {
            switch self {
            case .months(let months): "\(months) month\(months == 1 ? "" : "s")"
            case .days(let days): "\(days) day\(days == 1 ? "" : "s")"
            }
        }

        /// `13 months`, `1 month`, `400 days`; nil for anything else.
        public init?(text: String) {
            let words = text.split(separator: " ", omittingEmptySubsequences: true)
            guard words.count == 2, words[0].allSatisfy(\.isASCII), let count = Int(words[0]), count > 0,
                  count <= 1_200 else { return nil }
            switch words[1] {
            case "month", "months": self = .months(count)
            case "day" where count <= 36_500, "days" where count <= 36_500: self = .days(count)
            default: return nil
            }
        }
    }

    public var keepEvents: Keep
    /// Where the archive files and their manifests are written.
    public var directory: String

    public init(keepEvents: Keep, directory: String) {
        self.keepEvents = keepEvents
        self.directory = directory
    }
}
