/// What PostgreSQL can hold, checked before a transaction starts.
///
/// One value PostgreSQL refuses fails the whole statement, and with it the
/// group commit of every request in it; a client retries the 5xx with the same
/// batch, so one bad message would block its device's queue forever. So every
/// value taken from a request passes here first: an event that cannot be stored
/// is refused on its own (`invalid_text`, naming the field), and a quarantine
/// row is made storable by escaping, so the rejected message is still kept.
///
/// What PostgreSQL refuses: U+0000 in `text` and `jsonb` (in JSON text, its
/// escape `\u0000`), and a btree index entry over 2,704 bytes (the event log
/// indexes `message_id`, `anonymous_id` and `user_id` with the app).
public enum Storable {
    /// Most UTF-8 bytes of an indexed identifier: four bytes for each of the
    /// 255 characters a plain id may have, well inside the btree entry limit.
    /// Characters are graphemes, which have no byte bound of their own.
    public static let maxIndexedBytes = 1_020

    /// Why a value cannot be stored.
    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        /// The event's field, as the client named it (`messageId`, `properties`, …).
        public var field: String
        public var reason: String
        public var description: String { "\"\(field)\" \(reason)" }
    }

    /// The first field of `event` that PostgreSQL would refuse, or nil.
    public static func problem(in event: NewEvent) -> Problem? {
        let identifiers: [(String, String?)] = [
            ("messageId", event.messageID), ("anonymousId", event.anonymousID), ("userId", event.userID),
            ("previousId", event.previousID), ("groupId", event.groupID),
        ]
        for case (let field, let value?) in identifiers {
            if value.utf8.contains(0) { return Problem(field: field, reason: nulReason) }
            if value.utf8.count > maxIndexedBytes {
                return Problem(field: field, reason: "is \(value.utf8.count) bytes of UTF-8; at most \(maxIndexedBytes) can be indexed")
            }
        }
        let texts: [(String, String?)] = [("app", event.app), (event.type == .track ? "event" : "name", event.event)]
        for case (let field, let value?) in texts where value.utf8.contains(0) {
            return Problem(field: field, reason: nulReason)
        }
        let documents: [(String, String?)] = [("properties", event.properties), ("context", event.context), ("traits", event.traits)]
        for case (let field, let value?) in documents where jsonHoldsNUL(value) {
            return Problem(field: field, reason: nulReason)
        }
        return nil
    }

    static let nulReason = "contains a NUL character (\\u0000), which PostgreSQL text and jsonb cannot store"

    /// True when JSON text holds U+0000, raw or as the escape `\u0000` (which
    /// `jsonb` refuses); an escaped backslash before `u0000` is not one.
    public static func jsonHoldsNUL(_ json: String) -> Bool {
        var utf8 = json.utf8.makeIterator()
        while let byte = utf8.next() {
            if byte == 0 { return true }
            guard byte == UInt8(ascii: "\\") else { continue }
            guard let escaped = utf8.next() else { return false }
            if escaped == UInt8(ascii: "u") {
                var digits: [UInt8] = []
                while digits.count < 4, let digit = utf8.next() { digits.append(digit) }
                if digits == Array("0000".utf8) { return true }
            }
        }
        return false
    }

    /// `text` as PostgreSQL `text` can hold it: each NUL becomes the six
    /// characters `\u0000`, JSON's escape for it. For quarantine columns other
    /// than `raw`, which is JSON already and so holds NUL escaped by construction.
    public static func text(_ text: String) -> String {
        guard text.utf8.contains(0) else { return text }
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count + 8)
        for byte in text.utf8 {
            if byte == 0 { out.append(contentsOf: "\\u0000".utf8) } else { out.append(byte) }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
