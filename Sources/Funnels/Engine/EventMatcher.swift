/// Matches one event by track name or screen name plus equality filters.
///
/// Values compare as strings because the caller flattens every JSON value to
/// its textual form; YAML `page: 1` therefore matches the attribute `"1"`.
public struct EventMatcher: Sendable, Hashable {
    /// Which Segment message a matcher looks at.
    public enum Kind: String, Sendable, Hashable {
        /// A `track` message whose `event` equals the name.
        case event
        /// A `screen` message whose `name` equals the name.
        case screen

        /// The Segment message type it looks at.
        public var messageType: EventKind { self == .event ? .track : .screen }
    }

    public var kind: Kind
    public var name: String
    /// `where` filters: dotted path -> required value (all must hold).
    public var conditions: [String: String]

    public init(kind: Kind, name: String, conditions: [String: String] = [:]) {
        self.kind = kind
        self.name = name
        self.conditions = conditions
    }

    /// Shorthand for a track-event matcher.
    public static func event(_ name: String, where conditions: [String: String] = [:]) -> EventMatcher {
        EventMatcher(kind: .event, name: name, conditions: conditions)
    }

    /// Shorthand for a screen matcher.
    public static func screen(_ name: String, where conditions: [String: String] = [:]) -> EventMatcher {
        EventMatcher(kind: .screen, name: name, conditions: conditions)
    }

    public func matches(_ event: FunnelEvent) -> Bool {
        guard event.kind == kind.messageType, event.name == name else { return false }
        for (path, value) in conditions where event.attributes[path] != value {
            return false
        }
        return true
    }
}
