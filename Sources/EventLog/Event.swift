/// One validated message, ready for the log. Times are microseconds since the
/// Unix epoch; JSON columns are canonical JSON text.
public struct NewEvent: Sendable, Hashable {
    public var app: String
    public var type: MessageType
    public var messageID: String
    /// Track event name, or the screen/page name.
    public var event: String?
    public var anonymousID: String?
    public var userID: String?
    /// Corrected for device clock skew.
    public var timestamp: Int64
    /// As the client sent it.
    public var originalTimestamp: Int64?
    public var sentAt: Int64?
    public var receivedAt: Int64
    public var properties: String
    public var context: String
    public var traits: String?
    /// An alias's `previousId`: the id it joins to `userId`.
    public var previousID: String?
    /// A group call's `groupId`: the group (company, team) the person belongs to.
    public var groupID: String?

    public init(
        app: String, type: MessageType, messageID: String, event: String?, anonymousID: String?, userID: String?,
        timestamp: Int64, originalTimestamp: Int64?, sentAt: Int64?, receivedAt: Int64, properties: String, context: String,
        traits: String?, previousID: String? = nil, groupID: String? = nil
    ) {
        self.app = app
        self.type = type
        self.messageID = messageID
        self.event = event
        self.anonymousID = anonymousID
        self.userID = userID
        self.timestamp = timestamp
        self.originalTimestamp = originalTimestamp
        self.sentAt = sentAt
        self.receivedAt = receivedAt
        self.properties = properties
        self.context = context
        self.traits = traits
        self.previousID = previousID
        self.groupID = groupID
    }
}

/// A message that failed validation: stored in `quarantine` with its raw JSON
/// and reported back to the client by its index in the batch.
public struct Rejection: Sendable, Hashable {
    public var index: Int
    public var messageID: String?
    /// Stable, machine-readable reason (`invalid_timestamp`, `missing_event`, …).
    public var code: String
    public var message: String
    public var raw: String
    /// The message's own `userId`, `anonymousId` and `previousId`, where
    /// they could be read as ids: what keeps a suppressed person's rejected
    /// messages out of the quarantine too (docs/privacy.md).
    public var userID: String?
    public var anonymousID: String?
    public var previousID: String?

    public init(
        index: Int, messageID: String?, code: String, message: String, raw: String,
        userID: String? = nil, anonymousID: String? = nil, previousID: String? = nil
    ) {
        self.index = index
        self.messageID = messageID
        self.code = code
        self.message = message
        self.raw = raw
        self.userID = userID
        self.anonymousID = anonymousID
        self.previousID = previousID
    }
}
