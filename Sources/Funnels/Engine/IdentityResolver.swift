/// One sighting of an id with a user: a message carrying both an
/// `anonymousId` and a `userId` (any type, `identify` included), or an
/// `alias`, whose `previousId` is the id it joins to its `userId`.
public struct IdentityObservation: Sendable, Hashable {
    /// The id seen with the user: a device's anonymous id, or an alias's
    /// `previousId` (an anonymous id or another user id: ids are one
    /// namespace, as they are to the apps that send them).
    public var anonymousId: String?
    public var userId: String?
    /// Microseconds since the Unix epoch.
    public var timestamp: Int64

    public init(anonymousId: String?, userId: String?, timestamp: Int64) {
        self.anonymousId = anonymousId
        self.userId = userId
        self.timestamp = timestamp
    }

    /// An `alias` message's sighting: `previousId` is `userId` from `timestamp` on.
    public static func alias(previousId: String?, userId: String?, timestamp: Int64) -> IdentityObservation {
        IdentityObservation(anonymousId: previousId, userId: userId, timestamp: timestamp)
    }
}

/// The user an id is linked to, with the earliest time the pair was seen.
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

/// Merges ids into persons (docs/funnels.md, "Persons").
///
/// Every id (anonymous or user) is linked to at most one user: the one it was
/// first seen with (`IdentityLink.isPreferred`), by a message carrying both
/// or by an alias. A person is where the links lead: a message's id (its
/// `userId`, else its `anonymousId`) is followed link by link to an id with
/// no link of its own. A device follows its earliest user, and that user, if
/// an alias joined it to another, follows on. Where links close a loop (two
/// ids aliased to each other), the link seen last in the loop is not
/// followed: its id is the person.
///
/// The mapping `id -> IdentityLink` is a plain dictionary so an incremental
/// caller can persist it (one row per id), feed it new observations with
/// `record`, and recompute the persons whose link changed. Because each
/// winning link is a minimum under a total order, folding observations in
/// any order or in any number of batches gives the same mapping, and so the
/// same persons.
public enum IdentityResolver {
    /// Folds one observation into `links`; returns `true` when the id's
    /// winning user changed (or was first linked), i.e. when the events of
    /// that id may now belong to a different person.
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

    /// The person `id` belongs to: where its links lead.
    public static func person(of id: String, links: [String: IdentityLink]) -> String {
        var memo: [String: String] = [:]
        return person(of: id, links: links, memo: &memo)
    }

    /// The person of every id with a link, for storing beside the links.
    /// Most links end at their user (a device's, whose user has no link of
    /// their own): only the others are walked.
    public static func persons(of links: [String: IdentityLink]) -> [String: String] {
        var persons: [String: String] = [:]
        persons.reserveCapacity(links.count)
        var memo: [String: String] = [:]
        for (id, link) in links {
            if link.userId == id || links[link.userId] == nil {
                persons[id] = link.userId
            } else {
                persons[id] = person(of: id, links: links, memo: &memo)
            }
        }
        return persons
    }

    /// `person(of:links:)`, remembering in `memo` the person of every id it
    /// passes, so a whole mapping costs one walk per link.
    public static func person(of id: String, links: [String: IdentityLink], memo: inout [String: String]) -> String {
        var path: [String] = []
        var position: [String: Int] = [:]
        var current = id
        var person: String
        while true {
            if let known = memo[current] {
                person = known
                break
            }
            guard let link = links[current], link.userId != current else {
                person = current
                break
            }
            if let start = position[current] {
                // A loop: its least preferred link is not followed.
                let loop = path[start...].compactMap { id in links[id].map { (id, $0) } }
                person = loop.max { $0.1.isPreferred(over: $1.1) }?.0 ?? current
                break
            }
            position[current] = path.count
            path.append(current)
            current = link.userId
        }
        for passed in path { memo[passed] = person }
        memo[current] = memo[current] ?? person
        return person
    }

    /// The person a message belongs to, from its `userId`, else its
    /// `anonymousId`; `nil` when it carries neither.
    public static func personId(anonymousId: String?, userId: String?, links: [String: IdentityLink]) -> String? {
        (userId ?? anonymousId).map { person(of: $0, links: links) }
    }
}
