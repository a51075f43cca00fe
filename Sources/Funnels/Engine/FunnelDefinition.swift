import Foundation

/// Everything of a funnel that shapes the rows the nightly job stores for it:
/// who its persons are, what they reached and when, on which cohort day,
/// under which breakdown values, what the diagnostics and retention count.
/// The job stores it beside those rows and compares it with the
/// configuration in force on every run, so a changed funnel is recomputed
/// rather than reported from tables built for another definition.
///
/// What only reads stored rows (targets, alert thresholds, `min_support`, a
/// description, the order of funnels in the file) is left out: changing it
/// recomputes no one.
public struct FunnelDefinition: Sendable, Hashable, Codable {
    /// The engine's own rules: raised when a release changes what the same
    /// configuration stores, so every funnel is recomputed once after it.
    public static let currentEngine = 1

    public struct Matcher: Sendable, Hashable, Codable {
        public var kind: String
        public var name: String
        public var `where`: [String: String]

        init(_ matcher: EventMatcher) {
            kind = matcher.kind.rawValue
            name = matcher.name
            self.where = matcher.conditions
        }

        /// `event otp_verified where properties.method = sms`.
        var text: String {
            let filters = self.where.keys.sorted().map { "\($0) = \(self.where[$0] ?? "")" }
            return "\(kind) \(name)" + (filters.isEmpty ? "" : " where " + filters.joined(separator: ", "))
        }
    }

    public struct Step: Sendable, Hashable, Codable {
        public var name: String
        public var optional: Bool
        public var matchers: [Matcher]
        /// Seconds after the previous required step, when limited.
        public var within: Int64?

        var text: String {
            (optional ? "optional " : "") + matchers.map(\.text).joined(separator: " | ")
                + (within.map { " within \(FunnelDefinition.duration($0))" } ?? "")
        }
    }

    public struct Exclusion: Sendable, Hashable, Codable {
        public var matcher: Matcher
        /// Step numbers from 1, as configured.
        public var between: [Int]?

        var text: String {
            matcher.text + (between.map { " between steps \($0.map(String.init).joined(separator: " and "))" } ?? "")
        }

        init(matcher: Matcher, between: [Int]?) {
            self.matcher = matcher
            self.between = between
        }

        private enum CodingKeys: String, CodingKey { case matcher, between }

        /// Stored before exclusions had `between`, an exclusion was its matcher alone.
        public init(from decoder: any Decoder) throws {
            if let c = try? decoder.container(keyedBy: CodingKeys.self), c.contains(.matcher) {
                matcher = try c.decode(Matcher.self, forKey: .matcher)
                between = try c.decodeIfPresent([Int].self, forKey: .between)
            } else {
                matcher = try Matcher(from: decoder)
                between = nil
            }
        }
    }

    public var engine: Int
    public var app: String
    /// The zone cohort days are cut in.
    public var timeZone: String
    public var windowSeconds: Int64
    public var steps: [Step]
    public var exclusions: [Exclusion]
    public var breakdowns: [String]
    public var retentionDays: [Int]
    public var activeEvents: [Matcher]
    /// `ordered`, `strict` or `any`.
    public var order: String
    public var ignore: [Matcher]
    public var hold: [String]
    /// `first_step`, `last_step` or `step N` (from 1).
    public var attribution: String
    /// `group` for a funnel counting groups; nil for one counting persons.
    public var aggregateBy: String?

    /// `funnel`'s definition, its cohort days cut in `timeZone`.
    public init(_ funnel: Funnel, timeZone: String) {
        engine = Self.currentEngine
        app = funnel.app
        self.timeZone = timeZone
        windowSeconds = funnel.windowSeconds
        steps = funnel.steps.map {
            Step(name: $0.name, optional: $0.isOptional, matchers: $0.matchers.map(Matcher.init), within: $0.within)
        }
        // Their order changes no stored row: sorted, so reordering them recomputes nothing.
        exclusions = funnel.exclusions.map {
            Exclusion(matcher: Matcher($0.matcher), between: $0.between.map { [$0.lowerBound + 1, $0.upperBound + 1] })
        }.sorted { $0.text < $1.text }
        breakdowns = funnel.breakdowns
        retentionDays = funnel.retention.days
        activeEvents = funnel.retention.activeEvents.map(Matcher.init)
        order = funnel.order.rawValue
        ignore = funnel.ignore.map(Matcher.init).sorted { $0.text < $1.text }
        hold = funnel.hold.sorted()
        attribution = funnel.attribution.text
        aggregateBy = funnel.aggregateBy == .person ? nil : funnel.aggregateBy.rawValue
    }

    private enum CodingKeys: String, CodingKey {
        case engine, app, timeZone, windowSeconds, steps, exclusions, breakdowns, retentionDays, activeEvents
        case order, ignore, hold, attribution, aggregateBy
    }

    /// Reads a stored definition; the options absent from one stored before
    /// they existed take their defaults, which is what built its rows.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        engine = try c.decode(Int.self, forKey: .engine)
        app = try c.decode(String.self, forKey: .app)
        timeZone = try c.decode(String.self, forKey: .timeZone)
        windowSeconds = try c.decode(Int64.self, forKey: .windowSeconds)
        steps = try c.decode([Step].self, forKey: .steps)
        exclusions = try c.decode([Exclusion].self, forKey: .exclusions).sorted { $0.text < $1.text }
        breakdowns = try c.decode([String].self, forKey: .breakdowns)
        retentionDays = try c.decode([Int].self, forKey: .retentionDays)
        activeEvents = try c.decode([Matcher].self, forKey: .activeEvents)
        order = try c.decodeIfPresent(String.self, forKey: .order) ?? Funnel.Order.ordered.rawValue
        ignore = (try c.decodeIfPresent([Matcher].self, forKey: .ignore) ?? []).sorted { $0.text < $1.text }
        hold = (try c.decodeIfPresent([String].self, forKey: .hold) ?? []).sorted()
        attribution = try c.decodeIfPresent(String.self, forKey: .attribution) ?? "first_step"
        aggregateBy = try c.decodeIfPresent(String.self, forKey: .aggregateBy)
    }

    /// The definition as stored: JSON with sorted keys, the same text for the same definition.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        // Strings, integers and booleans only: encoding cannot fail.
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// A stored definition, or nil when it can't be read (written by another release).
    public init?(json: String) {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        guard let value = try? decoder.decode(Self.self, from: Data(json.utf8)) else { return nil }
        self = value
    }

    /// A short digest of `json` (64-bit FNV-1a, hex) for people and SQL to
    /// compare definitions at a glance; the job compares the definitions.
    public var fingerprint: String {
        let hex = String(FNV1a.hash(json), radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// What changed from `old` to this definition, in words a person reads
    /// ("window 24h → 1h"); empty when nothing did.
    public func changes(since old: FunnelDefinition) -> [String] {
        var changes: [String] = []
        if old.engine != engine { changes.append("engine rules \(old.engine) → \(engine)") }
        if old.app != app { changes.append("app \(old.app) → \(app)") }
        if old.timeZone != timeZone { changes.append("time zone \(old.timeZone) → \(timeZone)") }
        if old.windowSeconds != windowSeconds {
            changes.append("window \(Self.duration(old.windowSeconds)) → \(Self.duration(windowSeconds))")
        }
        if old.steps.map(\.text) != steps.map(\.text) {
            if old.steps.count != steps.count {
                changes.append("steps \(old.steps.count) → \(steps.count)")
            } else {
                for (index, (was, now)) in zip(old.steps, steps).enumerated() where was.text != now.text {
                    changes.append("step \(index + 1) \(was.text) → \(now.text)")
                }
            }
        } else if old.steps.map(\.name) != steps.map(\.name) {
            changes.append("step names \(old.steps.map(\.name).joined(separator: ", ")) → \(steps.map(\.name).joined(separator: ", "))")
        }
        if old.order != order { changes.append("order \(old.order) → \(order)") }
        Self.listChange("ignored event", old.ignore.map(\.text), ignore.map(\.text), into: &changes)
        Self.listChange("held path", old.hold, hold, into: &changes)
        if old.attribution != attribution { changes.append("attribution \(old.attribution) → \(attribution)") }
        if old.aggregateBy != aggregateBy { changes.append("counting \(old.aggregateBy ?? "person")s → \(aggregateBy ?? "person")s") }
        Self.listChange("exclusion", old.exclusions.map(\.text), exclusions.map(\.text), into: &changes)
        Self.listChange("breakdown", old.breakdowns, breakdowns, into: &changes)
        if old.retentionDays != retentionDays {
            changes.append(
                "retention days \(old.retentionDays.map(String.init).joined(separator: ", ")) → "
                    + retentionDays.map(String.init).joined(separator: ", "))
        }
        Self.listChange("retention active event", old.activeEvents.map(\.text), activeEvents.map(\.text), into: &changes)
        // The words may miss a difference (two matchers that read alike): the values decide.
        if changes.isEmpty && old != self { changes.append("definition changed") }
        return changes
    }

    /// "breakdown added: context.locale", "exclusion removed: …", or the
    /// order when only that changed.
    private static func listChange(_ noun: String, _ old: [String], _ new: [String], into changes: inout [String]) {
        guard old != new else { return }
        let added = new.filter { !old.contains($0) }, removed = old.filter { !new.contains($0) }
        if !added.isEmpty { changes.append("\(noun)\(added.count > 1 ? "s" : "") added: \(added.joined(separator: "; "))") }
        if !removed.isEmpty { changes.append("\(noun)\(removed.count > 1 ? "s" : "") removed: \(removed.joined(separator: "; "))") }
        if added.isEmpty && removed.isEmpty { changes.append("\(noun)s reordered: \(new.joined(separator: ", "))") }
    }

    /// `86400` → `24h`, `90` → `90s`: the configuration's own units.
    static func duration(_ seconds: Int64) -> String {
        for (unit, size) in [("d", Int64(86_400)), ("h", 3_600), ("m", 60)] where seconds >= size && seconds % size == 0 {
            // Days read better as hours up to two days, as windows are usually written.
            if unit == "d" && seconds < 3 * 86_400 { continue }
            return "\(seconds / size)\(unit)"
        }
        return "\(seconds)s"
    }
}
