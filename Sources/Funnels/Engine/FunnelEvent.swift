/// The kinds of Segment message the engine can see. Only `track` and `screen`
/// ever match a step; the others are accepted so callers can pass a person's
/// whole timeline without filtering it first.
public enum EventKind: String, Sendable, Hashable, CaseIterable {
    case track, screen, identify, page, group, alias
}

/// One event of one person, reduced to what funnel evaluation needs.
///
/// The module never parses JSON: the caller flattens exactly the dotted paths
/// listed in `FunnelConfiguration.referencedPaths` into `attributes`, so the
/// engine stays independent of the storage format.
public struct FunnelEvent: Sendable, Hashable {
    /// Client-generated id; events sharing it are the same event sent twice.
    public var messageId: String
    public var kind: EventKind
    /// The track event name, or the screen name for `screen` messages.
    public var name: String?
    /// Microseconds since the Unix epoch, already clock-corrected by ingestion.
    public var timestamp: Int64
    /// Values at dotted paths (`properties.page` -> `"1"`), compared as strings.
    public var attributes: [String: String]

    public init(
        messageId: String,
        kind: EventKind,
        name: String?,
        timestamp: Int64,
        attributes: [String: String] = [:]
    ) {
        self.messageId = messageId
        self.kind = kind
        self.name = name
        self.timestamp = timestamp
        self.attributes = attributes
    }
}
