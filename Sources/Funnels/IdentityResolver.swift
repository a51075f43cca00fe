/// One sighting of identifiers on a message (any type, `identify` included).
public struct IdentityObservation: Sendable, Hashable {
    public var anonymousId: String?
    public var userId: String?
    /// Microseconds since the Unix epoch.
    public var timestamp: Int64

    public init(anonymousId: String?, userId: String?, timestamp: Int64) {
        self.anonymousId = anonymousId
        self.userId = userId
        self.timestamp = timestamp
    }
}

/// The user an anonymous id belongs to, with the earliest time the pair was seen.
public struct IdentityLink: Sendable, Hashable {
    public var userId: String
    public var firstSeen: Int64

    public init(userId: String, firstSeen: Int64) {
        self.userId = userId
        self.firstSeen = firstSeen
    }

    /// The total order that decides between competing users of one device:
    /// earliest sighting first, then the lexicographically smallest userId, so
    /// the winner never depends on the order observations are processed in.
    public func isPreferred(over other: IdentityLink) -> Bool {
        (firstSeen, userId) < (other.firstSeen, other.userId)
    }
}

/// Merges anonymous ids into persons (docs/funnels.md).
///
/// A person is the `userId` when a message has one, else the user its
/// `anonymousId` is linked to, else the `anonymousId` itself. The mapping
/// `anonymousId -> IdentityLink` is a plain dictionary so an incremental
/// caller can persist it (one row per anonymous id), feed it new observations
/// with `record`, and recompute the persons whose link changed. Because the
/// winning link is a minimum under a total order, folding observations in any
/// order or in any number of batches gives the same mapping.
public enum IdentityResolver {
    /// Folds one observation into `links`; returns `true` when the anonymous
    /// id's winning user changed (or was first linked), i.e. when the events
    /// of that anonymous id now belong to a different person.
    @discardableResult
    public static func record(_ observation: IdentityObservation, into links: inout [String: IdentityLink]) -> Bool {
        guard let anonymousId = observation.anonymousId, let userId = observation.userId else { return false }
        let candidate = IdentityLink(userId: userId, firstSeen: observation.timestamp)
        guard let current = links[anonymousId] else {
            links[anonymousId] = candidate
            return true
        }
        guard candidate.isPreferred(over: current) else { return false }
        links[anonymousId] = candidate
        return current.userId != userId
    }

    /// Builds the whole mapping from scratch (the `rebuild` path).
    public static func links(from observations: some Sequence<IdentityObservation>) -> [String: IdentityLink] {
        var links: [String: IdentityLink] = [:]
        for observation in observations {
            record(observation, into: &links)
        }
        return links
    }

    /// The person an anonymous id belongs to: its linked user, or itself.
    public static func resolve(personFor anonymousId: String, links: [String: IdentityLink]) -> String {
        links[anonymousId]?.userId ?? anonymousId
    }

    /// The person a message belongs to: its `userId` when known, otherwise
    /// the person of its `anonymousId`; `nil` when it carries neither.
    public static func personId(anonymousId: String?, userId: String?, links: [String: IdentityLink]) -> String? {
        if let userId { return userId }
        return anonymousId.map { resolve(personFor: $0, links: links) }
    }
}
