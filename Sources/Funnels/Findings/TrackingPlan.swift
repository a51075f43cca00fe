/// What an app promises to send (docs/tracking-health.md), under
/// `tracking_plan:` of the app in the configuration: its events and screens,
/// each with the properties it must carry and their JSON types. Optional.
///
/// A message that breaks it is stored all the same and counted by the
/// nightly job in `analytics.tracking_violations`; with `enforce: true`,
/// ingestion quarantines it instead, saying which rule it broke.
public struct TrackingPlan: Sendable, Hashable {
    /// The JSON types a property can be required to have.
    public enum JSONType: String, Sendable, Hashable, CaseIterable {
        case string, number, boolean, object, array
    }

    /// One planned event or screen.
    public struct Entry: Sendable, Hashable {
        public var kind: EventMatcher.Kind
        public var name: String
        /// Required properties: a path under `properties` (`plan.tier`) and its type.
        public var properties: [String: JSONType]

        public init(kind: EventMatcher.Kind, name: String, properties: [String: JSONType] = [:]) {
            self.kind = kind
            self.name = name
            self.properties = properties
        }

        /// The Segment message type it plans: `track` or `screen`.
        public var type: String { kind.messageType.rawValue }
    }

    public var entries: [Entry]
    public var enforce: Bool

    public init(entries: [Entry], enforce: Bool = false) {
        self.entries = entries
        self.enforce = enforce
    }
}
