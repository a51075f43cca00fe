/// What ingestion does with properties an app marks as personal data.
public struct PIIPolicy: Sendable, Hashable {
    public enum Mode: String, Sendable, Hashable {
        /// Drop the property before storage.
        case remove
        /// Replace its value with `sha256:<hex>` of the value's canonical JSON,
        /// so analysts can still count distinct values without seeing them.
        case hash
    }

    public static let defaultProperties: Set<String> = ["phone", "email", "date_of_birth", "password"]
    public static let `default` = PIIPolicy(properties: defaultProperties, mode: .remove)

    public var properties: Set<String>
    public var mode: Mode

    public init(properties: Set<String>, mode: Mode) {
        self.properties = properties
        self.mode = mode
    }
}

/// The limits and settings validation applies.
public struct IngestPolicy: Sendable {
    /// Oldest accepted event time, before the receive time (default 30 days).
    public var horizonSeconds: Int64 = 30 * 86_400
    /// How far ahead of the receive time an event may be (24 h).
    public var futureToleranceSeconds: Int64 = 86_400
    /// Skew between `sentAt` and the receive time beyond which timestamps are corrected.
    public var skewThresholdSeconds: Int64 = 60
    /// Largest message, as canonical JSON bytes.
    public var maxMessageBytes = 32 * 1024
    /// Per-app PII settings; apps not listed get `defaultPII`.
    public var pii: [String: PIIPolicy] = [:]
    public var defaultPII: PIIPolicy = .default
    /// The tracking plans of the apps that enforce theirs, by app.
    public var enforcedPlans: [String: TrackingRules] = [:]

    public init() {}

    public func piiPolicy(for app: String) -> PIIPolicy { pii[app] ?? defaultPII }
}

/// An app's tracking plan as ingestion enforces it, when the app asks
/// (docs/tracking-health.md): its track events and screens, each with the
/// properties it must carry and their JSON types.
public struct TrackingRules: Sendable, Hashable {
    /// `track` or `screen`, a unit separator, the name -> property path under `properties` -> JSON type.
    public var events: [String: [String: String]]

    public init(events: [String: [String: String]]) { self.events = events }

    public static func key(type: String, name: String) -> String { type + "\u{1F}" + name }

    /// Why a `type` message named `name` with `properties` breaks the plan of `app`; nil when it keeps it.
    public func problem(app: String, type: String, name: String, properties: [String: JSONValue]) -> String? {
        let what = "\(type == "track" ? "event" : "screen") \"\(name)\""
        guard let required = events[Self.key(type: type, name: name)] else { return "\(what) is not in \(app)'s tracking plan" }
        for (path, expected) in required.sorted(by: { $0.key < $1.key }) {
            var value: JSONValue? = .object(properties)
            for key in path.split(separator: ".") { value = value?[String(key)] }
            guard let value, !value.isNull else { return "\(what) needs properties.\(path) (\(expected)) by \(app)'s tracking plan" }
            let seen = Self.jsonType(value)
            if seen != expected { return "properties.\(path) of \(what) is \(seen); \(app)'s tracking plan says \(expected)" }
        }
        return nil
    }

    static func jsonType(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "boolean"
        case .int, .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}
