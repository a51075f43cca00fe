import Crypto
import Foundation
import LibPQ

/// A message in an archive file: a row of the log in PostgreSQL's `COPY`
/// text format (docs/lifecycle.md), its columns in `columns`' order,
/// tab-separated, `\N` for NULL, a backslash escaping a tab, a newline, a
/// carriage return or itself; the file's first line names the columns.
/// What `COPY … TO` gives and `COPY … FROM` takes: the archive is the log's
/// own rows, and a restore reads them back without parsing.
enum ArchiveRow {
    static let columns = [
        "seq", "app", "type", "message_id", "event", "anonymous_id", "user_id", "timestamp", "original_timestamp", "sent_at",
        "received_at", "properties", "context", "traits", "previous_id", "group_id",
    ]
    static let header = columns.joined(separator: "\t")
    static let app = 1, anonymousId = 5, userId = 6, timestamp = 7, receivedAt = 10, previousId = 14

    /// The ranges of the fields of `line` (without its newline).
    static func fields(_ line: UnsafeRawBufferPointer) -> [Range<Int>] {
        var fields: [Range<Int>] = []
        fields.reserveCapacity(columns.count)
        Self.fields(line, into: &fields)
        return fields
    }

    /// The same into `fields`, emptied first: a month's rows reuse one array.
    static func fields(_ line: UnsafeRawBufferPointer, into fields: inout [Range<Int>]) {
        CopyText.fieldRanges(of: line, into: &fields)
    }

    /// A field's text, unescaped; nil for NULL.
    static func text(_ line: UnsafeRawBufferPointer, _ field: Range<Int>) -> String? {
        CopyText.field(UnsafeRawBufferPointer(rebasing: line[field]))
    }

    /// The ids a message carries: its anonymous, user and previous id.
    static func ids(_ line: UnsafeRawBufferPointer, _ fields: [Range<Int>]) -> [String] {
        [anonymousId, userId, previousId].compactMap { fields.count > $0 ? text(line, fields[$0]) : nil }
    }
}

/// The log's keyed hash of an id, computed here as `onramp_hmac` computes
/// it in the database (migration 020): HMAC-SHA256 of "app NUL kind NUL
/// id" under the key's two stored pads. The archive's indexes need one per
/// id of a month; in SQL they were most of an archive's time.
struct KeyedHash: Sendable {
    let innerPad: [UInt8]
    let outerPad: [UInt8]

    func hex(app: String, kind: String, id: String) -> String {
        var message = innerPad
        message.append(contentsOf: app.utf8)
        message.append(0)
        message.append(contentsOf: kind.utf8)
        message.append(0)
        message.append(contentsOf: id.utf8)
        var outer = SHA256()
        outer.update(data: outerPad)
        outer.update(data: Array(SHA256.hash(data: message)))
        return GzipWriter.hex(outer.finalize())
    }
}
