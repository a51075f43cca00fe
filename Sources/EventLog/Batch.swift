public import Foundation

/// What a client posted, decoded but not yet validated message by message.
public struct IncomingBatch: Sendable {
    /// The messages, each still raw: validation decides which are events.
    public var messages: [JSONValue]
    /// When the client sent the batch (microseconds), if it said so parseably.
    public var sentAt: Int64?
    /// Batch-level context, merged under each message's own.
    public var context: [String: JSONValue]
    /// `writeKey` from the body, one of the three ways to authenticate.
    public var writeKey: String?

    public init(messages: [JSONValue], sentAt: Int64? = nil, context: [String: JSONValue] = [:], writeKey: String? = nil) {
        self.messages = messages
        self.sentAt = sentAt
        self.context = context
        self.writeKey = writeKey
    }
}

/// A body the server refuses whole (HTTP 400): it names the field at fault.
public struct BatchError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: String
    public var field: String
    public var message: String
    public var description: String { "\(code) (\(field)): \(message)" }

    public init(code: String, field: String, message: String) {
        self.code = code
        self.field = field
        self.message = message
    }
}

/// The Segment message types Onramp stores.
public enum MessageType: String, Sendable, CaseIterable {
    case track, screen, identify, page, group, alias
}

/// Decodes request bodies in Segment's wire format.
public enum BatchDecoder {
    /// `{"batch": [...], "sentAt"?, "context"?, "writeKey"?}` (`/v1/batch`, `/v1/b`).
    public static func decodeBatch(_ body: Data) throws(BatchError) -> IncomingBatch {
        let root = try object(body)
        guard let batchValue = root["batch"] else {
            throw BatchError(code: "missing_batch", field: "batch", message: "the body has no \"batch\" array of messages")
        }
        guard case .array(let messages) = batchValue else {
            throw BatchError(code: "invalid_batch", field: "batch", message: "\"batch\" must be an array of messages")
        }
        var context: [String: JSONValue] = [:]
        if let value = root["context"], !value.isNull {
            guard case .object(let o) = value else {
                throw BatchError(code: "invalid_context", field: "context", message: "batch-level \"context\" must be a JSON object")
            }
            context = o
        }
        return IncomingBatch(
            messages: messages, sentAt: root["sentAt"]?.stringValue.flatMap(RFC3339.parse), context: context,
            writeKey: root["writeKey"]?.stringValue)
    }

    /// One message posted to `/v1/track`, `/v1/screen`, … : its type comes from the path.
    public static func decodeSingle(_ body: Data, type: MessageType) throws(BatchError) -> IncomingBatch {
        var message = try object(body)
        message["type"] = .string(type.rawValue)
        let sentAt = message["sentAt"]?.stringValue.flatMap(RFC3339.parse)
        let writeKey = message["writeKey"]?.stringValue
        message["writeKey"] = nil
        return IncomingBatch(messages: [.object(message)], sentAt: sentAt, writeKey: writeKey)
    }

    private static func object(_ body: Data) throws(BatchError) -> [String: JSONValue] {
        let value: JSONValue
        do {
            value = try JSONParser.parse(body)
        } catch {
            throw BatchError(code: "invalid_json", field: "body", message: "the body is not valid JSON: \(error)")
        }
        guard case .object(let o) = value else {
            throw BatchError(code: "invalid_body", field: "body", message: "the body must be a JSON object")
        }
        return o
    }
}
