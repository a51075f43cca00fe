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

    public init() {}

    public func piiPolicy(for app: String) -> PIIPolicy { pii[app] ?? defaultPII }
}
