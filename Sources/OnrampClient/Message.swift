import Foundation

/// One Segment-format message as the client queues and sends it. The
/// `messageId` is fixed when the app calls `track`, so every retry of the same
/// event carries the same id and the server stores it once.
public struct Message: Codable, Sendable, Hashable {
    public var type: String
    public var event: String?
    public var name: String?
    public var messageId: String
    public var anonymousId: String
    public var userId: String?
    /// For `alias`: the id the user was known by until now.
    public var previousId: String?
    /// For `group`: the account or organization.
    public var groupId: String?
    public var timestamp: String
    public var properties: [String: JSONValue]?
    public var traits: [String: JSONValue]?
    public var context: [String: JSONValue]
}

/// The batch envelope of Segment's HTTP Tracking API (`POST /v1/batch`).
struct BatchEnvelope: Encodable {
    var batch: [Message]
    var sentAt: String
    var writeKey: String
}

/// What the server says about a batch it accepted (rejections by index).
struct BatchResponse: Decodable {
    struct Rejection: Decodable {
        var index: Int?
        var messageId: String?
        var code: String?
        var message: String?
    }
    var accepted: Int?
    var duplicates: Int?
    var rejected: [Rejection]?
}

enum ISO8601 {
    static func string(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
