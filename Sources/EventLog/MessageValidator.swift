import Crypto
import Foundation

/// Turns the raw messages of one batch into events or rejections, as docs/ingestion.md
/// says. Pure: no I/O, the receive time and policy are inputs.
public enum MessageValidator {
    public struct Outcome: Sendable {
        /// Valid events with their index in the batch.
        public var events: [(index: Int, event: NewEvent)] = []
        public var rejections: [Rejection] = []
    }

    /// Longest `messageId`, `anonymousId`, `userId` (they are index keys).
    public static let maxIdentifierLength = 255
    /// Longest event or screen name.
    public static let maxNameLength = 200

    public static func validate(
        _ batch: IncomingBatch, app: String, receivedAt: Int64, policy: IngestPolicy
    ) -> Outcome {
        var outcome = Outcome()
        let pii = policy.piiPolicy(for: app)
        // Batch-level context goes into every message's stored context.
        let contextNUL = JSONValue.object(batch.context).pathToNUL("context")
        for (index, message) in batch.messages.enumerated() {
            let result: Result<NewEvent, Failure> =
                if let contextNUL {
                    .failure(Failure("invalid_text", "the batch's \"\(contextNUL)\" \(Storable.nulReason)"))
                } else {
                    validate(message, batch: batch, app: app, receivedAt: receivedAt, policy: policy, pii: pii)
                }
            switch result {
            case .success(let event): outcome.events.append((index, event))
            case .failure(let failure):
                // Its ids as a stored event's would be (a number as its digits); none that text cannot hold.
                func id(_ key: String) -> String? {
                    guard case .success(let text?) = identifier(message[key]), !text.contains("\0") else { return nil }
                    return text
                }
                outcome.rejections.append(
                    Rejection(
                        index: index, messageID: message["messageId"]?.stringValue, code: failure.code,
                        message: failure.message, raw: message.canonicalText,
                        userID: id("userId"), anonymousID: id("anonymousId"), previousID: id("previousId")))
            }
        }
        return outcome
    }

    struct Failure: Error {
        let code: String
        let message: String
        init(_ code: String, _ message: String) {
            self.code = code
            self.message = message
        }
    }

    static func validate(
        _ message: JSONValue, batch: IncomingBatch, app: String, receivedAt: Int64, policy: IngestPolicy, pii: PIIPolicy
    ) -> Result<NewEvent, Failure> {
        guard case .object(let fields) = message else {
            return .failure(Failure("invalid_message", "a message must be a JSON object"))
        }
        let raw = message.canonicalText
        guard raw.utf8.count <= policy.maxMessageBytes else {
            return .failure(Failure("message_too_large", "the message is \(raw.utf8.count) bytes; at most \(policy.maxMessageBytes) are accepted"))
        }
        if let path = message.pathToNUL("") {
            return .failure(Failure("invalid_text", "\"\(path)\" \(Storable.nulReason)"))
        }
        guard let typeName = fields["type"]?.stringValue else {
            return .failure(Failure("invalid_type", "\"type\" is missing or not a string"))
        }
        guard let type = MessageType(rawValue: typeName) else {
            return .failure(Failure("invalid_type", "\"type\" must be one of track, screen, identify, page, group, alias"))
        }

        // Names.
        var name: String?
        switch type {
        case .track:
            guard let event = fields["event"]?.stringValue else {
                return .failure(Failure("missing_event", "a track message needs \"event\", a string"))
            }
            guard isValidName(event) else {
                return .failure(Failure("invalid_event", "\"event\" must be 1–\(maxNameLength) characters of printable text"))
            }
            name = event
        case .screen:
            guard let screen = fields["name"]?.stringValue else {
                return .failure(Failure("missing_name", "a screen message needs \"name\", a string"))
            }
            guard isValidName(screen) else {
                return .failure(Failure("invalid_name", "\"name\" must be 1–\(maxNameLength) characters of printable text"))
            }
            name = screen
        case .page:
            if let value = fields["name"], !value.isNull {
                guard let page = value.stringValue, isValidName(page) else {
                    return .failure(Failure("invalid_name", "\"name\" must be 1–\(maxNameLength) characters of printable text"))
                }
                name = page
            }
        case .identify, .group, .alias:
            break
        }

        // Identity.
        let userID: String?
        let anonymousID: String?
        switch (identifier(fields["userId"]), identifier(fields["anonymousId"])) {
        case (.failure(let why), _): return .failure(Failure("invalid_user_id", "\"userId\" \(why)"))
        case (_, .failure(let why)): return .failure(Failure("invalid_anonymous_id", "\"anonymousId\" \(why)"))
        case (.success(let u), .success(let a)):
            userID = u
            anonymousID = a
        }
        guard userID != nil || anonymousID != nil else {
            return .failure(Failure("missing_identity", "a message needs \"anonymousId\" or \"userId\""))
        }
        // What an alias joins and what a group names, as Segment's specification requires them.
        /// The id in `field`, which this type of message needs (`code`: `previous_id`, `group_id`).
        func required(_ field: String, code: String, missing: String) -> Result<String, Failure> {
            switch identifier(fields[field]) {
            case .failure(let problem): .failure(Failure("invalid_\(code)", "\"\(field)\" \(problem)"))
            case .success(let id?): .success(id)
            case .success(nil): .failure(Failure("missing_\(code)", missing))
            }
        }
        var previousID: String?
        var groupID: String?
        switch type {
        case .alias:
            switch required("previousId", code: "previous_id", missing: "an alias message needs \"previousId\", the id it joins to \"userId\"") {
            case .failure(let failure): return .failure(failure)
            case .success(let id): previousID = id
            }
            guard userID != nil else {
                return .failure(Failure("missing_user_id", "an alias message needs \"userId\", the id \"previousId\" is joined to"))
            }
        case .group:
            switch required("groupId", code: "group_id", missing: "a group message needs \"groupId\", the group the person belongs to") {
            case .failure(let failure): return .failure(failure)
            case .success(let id): groupID = id
            }
        case .track, .screen, .page, .identify:
            break
        }

        // Objects.
        var properties: [String: JSONValue] = [:]
        switch objectField(fields["properties"]) {
        case .failure: return .failure(Failure("invalid_properties", "\"properties\" must be a JSON object"))
        case .success(let o): properties = o
        }
        var messageContext: [String: JSONValue] = [:]
        switch objectField(fields["context"]) {
        case .failure: return .failure(Failure("invalid_context", "\"context\" must be a JSON object"))
        case .success(let o): messageContext = o
        }
        var traits: [String: JSONValue]?
        if let value = fields["traits"], !value.isNull {
            guard case .object(let o) = value else {
                return .failure(Failure("invalid_traits", "\"traits\" must be a JSON object"))
            }
            traits = o
        }

        // Message id: the client's, or one derived from the content.
        let messageID: String
        if let value = fields["messageId"], !value.isNull {
            guard let id = value.stringValue, !id.isEmpty,
                isPrintableASCII(id) && id.utf8.count <= maxIdentifierLength
                    || id.count <= maxIdentifierLength && id.utf8.count <= Storable.maxIndexedBytes
                        && !id.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else {
                return .failure(Failure("invalid_message_id", "\"messageId\" must be a string of 1–\(maxIdentifierLength) printable characters (at most \(Storable.maxIndexedBytes) bytes of UTF-8)"))
            }
            messageID = id
        } else {
            messageID = deterministicID(fields)
        }

        // Time.
        var original: Int64?
        let timestampValue = fields["timestamp"] ?? fields["originalTimestamp"]
        if let value = timestampValue, !value.isNull {
            guard let text = value.stringValue, let parsed = RFC3339.parse(text) else {
                return .failure(Failure("invalid_timestamp", "\"timestamp\" must be an RFC 3339 date-time such as 2026-11-21T10:00:01.234Z"))
            }
            original = parsed
        }
        let sentAt = fields["sentAt"]?.stringValue.flatMap(RFC3339.parse) ?? batch.sentAt
        let timestamp = ClockSkew.corrected(
            original: original, sentAt: sentAt, receivedAt: receivedAt, thresholdSeconds: policy.skewThresholdSeconds)
        if timestamp > receivedAt + policy.futureToleranceSeconds * 1_000_000 {
            return .failure(Failure("timestamp_in_future", "\"timestamp\" is more than 24 h after the time the server received it"))
        }
        if timestamp < receivedAt - policy.horizonSeconds * 1_000_000 {
            return .failure(Failure("timestamp_too_old", "\"timestamp\" is older than the accepted horizon of \(policy.horizonSeconds / 86_400) days"))
        }

        // The app's tracking plan, on the properties as sent (before PII is removed).
        if let rules = policy.enforcedPlans[app], type == .track || type == .screen, let name,
           let problem = rules.problem(app: app, type: type.rawValue, name: name, properties: properties) {
            return .failure(Failure("tracking_plan", problem))
        }

        // PII.
        properties = scrub(properties, pii)
        traits = traits.map { scrub($0, pii) }
        if case .object(let contextTraits)? = messageContext["traits"] {
            messageContext["traits"] = .object(scrub(contextTraits, pii))
        }
        var batchContext = batch.context
        if case .object(let contextTraits)? = batchContext["traits"] {
            batchContext["traits"] = .object(scrub(contextTraits, pii))
        }
        let event = NewEvent(
            app: app, type: type, messageID: messageID, event: name, anonymousID: anonymousID, userID: userID,
            timestamp: timestamp, originalTimestamp: original, sentAt: sentAt, receivedAt: receivedAt,
            properties: JSONValue.object(properties).canonicalText,
            context: JSONValue.object(JSONValue.merge(batchContext, under: messageContext)).canonicalText,
            traits: traits.map { JSONValue.object($0).canonicalText }, previousID: previousID, groupID: groupID)
        // The checks above should leave nothing PostgreSQL refuses; this one looks
        // at the values as they will be stored, so a rule missed above fails one
        // message here, not its whole group commit.
        if let problem = Storable.problem(in: event) {
            return .failure(Failure("unstorable", problem.description))
        }
        return .success(event)
    }

    /// A message id from the message's canonical content, without the fields a
    /// retry may change (`sentAt`, `writeKey`, `receivedAt`), so a resent payload
    /// gets the same id and is counted as a duplicate.
    public static func deterministicID(_ fields: [String: JSONValue]) -> String {
        var content = fields
        for volatile in ["sentAt", "writeKey", "receivedAt", "messageId"] { content[volatile] = nil }
        let digest = SHA256.hash(data: Data(JSONValue.object(content).canonicalText.utf8))
        return "onramp-" + digest.map { String(format: "%02x", $0) }.joined().prefix(40)
    }

    /// True when every byte is printable ASCII (space to `~`): then the checks
    /// below reduce to byte counts, with no grapheme or Unicode property lookups.
    static func isPrintableASCII(_ text: String) -> Bool {
        text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
    }

    static func isValidName(_ text: String) -> Bool {
        if isPrintableASCII(text) {
            let count = text.utf8.count
            return count >= 1 && count <= maxNameLength && text.utf8.contains { $0 != 0x20 }
        }
        let count = text.count
        guard count >= 1, count <= maxNameLength else { return false }
        guard !text.allSatisfy({ $0.isWhitespace }) else { return false }
        return !text.unicodeScalars.contains { scalar in
            switch scalar.properties.generalCategory {
            case .control, .surrogate, .unassigned, .privateUse, .lineSeparator, .paragraphSeparator: true
            default: false
            }
        }
    }

    /// `userId` / `anonymousId`: a string or a number (Segment allows both); an
    /// empty string counts as absent (analytics-kotlin sends `""` before login).
    static func identifier(_ value: JSONValue?) -> Result<String?, IdentifierProblem> {
        guard let value else { return .success(nil) }
        let text: String
        switch value {
        case .null: return .success(nil)
        case .string(let s): text = s
        case .int(let i): text = String(i)
        case .double(let d) where d.isFinite && d == d.rounded() && abs(d) < 1e15: text = String(Int64(d))
        default: return .failure(IdentifierProblem("must be a string"))
        }
        if text.isEmpty { return .success(nil) }
        if isPrintableASCII(text), text.utf8.count <= maxIdentifierLength { return .success(text) }
        guard text.count <= maxIdentifierLength else {
            return .failure(IdentifierProblem("is longer than \(maxIdentifierLength) characters"))
        }
        guard text.utf8.count <= Storable.maxIndexedBytes else {
            return .failure(IdentifierProblem("is longer than \(Storable.maxIndexedBytes) bytes of UTF-8"))
        }
        guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            return .failure(IdentifierProblem("contains control characters"))
        }
        return .success(text)
    }

    struct IdentifierProblem: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    struct NotAnObject: Error {}

    static func objectField(_ value: JSONValue?) -> Result<[String: JSONValue], NotAnObject> {
        guard let value else { return .success([:]) }
        switch value {
        case .null: return .success([:])
        case .object(let o): return .success(o)
        default: return .failure(NotAnObject())
        }
    }

    /// Removes or hashes the policy's properties (top-level keys, matched
    /// case-insensitively, since apps spell `Email` and `email` alike).
    public static func scrub(_ properties: [String: JSONValue], _ policy: PIIPolicy) -> [String: JSONValue] {
        guard !policy.properties.isEmpty else { return properties }
        let lowered = Set(policy.properties.map { $0.lowercased() })
        var out: [String: JSONValue] = [:]
        for (key, value) in properties {
            if lowered.contains(key.lowercased()) {
                if policy.mode == .hash, !value.isNull {
                    let digest = SHA256.hash(data: Data(value.canonicalText.utf8))
                    out[key] = .string("sha256:" + digest.map { String(format: "%02x", $0) }.joined())
                }
            } else {
                out[key] = value
            }
        }
        return out
    }
}

/// Device clock correction, as Segment does it.
public enum ClockSkew {
    /// `timestamp = receivedAt − (sentAt − original)` when `sentAt` and the
    /// receive time differ by more than the threshold (a wrong device clock,
    /// not network latency); otherwise the client's time, so one device's
    /// events never reorder. No original timestamp means the receive time.
    public static func corrected(original: Int64?, sentAt: Int64?, receivedAt: Int64, thresholdSeconds: Int64) -> Int64 {
        guard let original else { return receivedAt }
        guard let sentAt, abs(sentAt - receivedAt) > thresholdSeconds * 1_000_000 else { return original }
        return receivedAt - (sentAt - original)
    }
}
