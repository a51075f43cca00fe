import Foundation
import Funnels

/// Events of one app as columns, in no particular order: what a query-time
/// funnel reads of the log, four or eight bytes per value. Names, identifiers
/// and attribute values are numbers into the store's `StringTable`s (0: none).
struct EventColumns: Sendable {
    var time: [Int64] = []
    var kind: [UInt8] = []
    var name: [UInt32] = []
    var anonymous: [UInt32] = []
    var user: [UInt32] = []
    /// An alias's previous id (0 on every other message): identity only.
    var previous: [UInt32] = []
    /// A `group` call's group id (0 on every other message), numbered with the ids.
    var group: [UInt32] = []
    /// One column per stored path, aligned with the manifest's `paths`.
    var attributes: [[UInt32]] = []
    /// Message ids, read one at a time when a person's events tie in time
    /// (the engine orders ties by them); one file per segment.
    var messages: [MessageIds] = []
    /// Where each segment's events start, for `messages`.
    var segmentStarts: [Int] = []

    var count: Int { time.count }

    init(paths: Int) {
        attributes = Array(repeating: [], count: paths)
    }

    static let kinds = EventKind.allCases

    /// Appends `other` (another segment), its message file with it.
    mutating func append(_ other: EventColumns) {
        let start = count
        time += other.time
        kind += other.kind
        name += other.name
        anonymous += other.anonymous
        user += other.user
        previous += other.previous
        group += other.group
        // A column not loaded here (empty while events are not) stays empty.
        for index in attributes.indices where index < other.attributes.count && attributes[index].count == start {
            attributes[index] += other.attributes[index]
        }
        for (segmentStart, messages) in zip(other.segmentStarts, other.messages) {
            segmentStarts.append(start + segmentStart)
            self.messages.append(messages)
        }
    }

    /// The message id of event `index` (two positioned reads).
    func messageId(_ index: Int) throws -> String {
        let segment = (segmentStarts.lastIndex { $0 <= index }) ?? 0
        return try messages[segment].id(index - segmentStarts[segment])
    }

    /// Checks that every number names a string its table holds (a kind, one
    /// of `kinds`): a damaged file is found here, not as a trap later.
    func checkNumbers(names: Int, ids: Int, values: [Int?]) throws {
        func check(_ column: [UInt32], below limit: Int, _ what: String) throws {
            guard let largest = column.max(), Int(largest) > limit else { return }
            throw ColumnStoreError.damaged("\(what) number \(largest) of \(limit)")
        }
        try check(name, below: names, "name")
        try check(anonymous, below: ids, "anonymous id")
        try check(user, below: ids, "user id")
        try check(previous, below: ids, "previous id")
        try check(group, below: ids, "group id")
        if let kind = kind.max(), Int(kind) >= Self.kinds.count { throw ColumnStoreError.damaged("kind \(kind)") }
        for (path, count) in values.enumerated() {
            if let count, path < attributes.count { try check(attributes[path], below: count, "value of path \(path)") }
        }
    }

    // MARK: Files

    private enum Column: String, CaseIterable {
        case time = "time.i64", kind = "kind.u8", name = "name.u32", anonymous = "anonymous.u32", user = "user.u32"
        case previous = "previous.u32", group = "group.u32"
    }

    static func attributeFile(_ path: Int) -> String { "path-\(path).u32" }

    /// Reads a segment of `count` events written by `save`, of its `paths`
    /// attribute columns only those in `reading` (the others stay empty).
    static func load(_ directory: URL, count: Int, paths: Int, reading: Set<Int>) throws -> EventColumns {
        func file(_ name: String) -> URL { directory.appendingPathComponent(name) }
        var columns = EventColumns(paths: paths)
        columns.time = try ColumnFile.values(file(Column.time.rawValue), count: count)
        columns.kind = try ColumnFile.values(file(Column.kind.rawValue), count: count)
        columns.name = try ColumnFile.values(file(Column.name.rawValue), count: count)
        columns.anonymous = try ColumnFile.values(file(Column.anonymous.rawValue), count: count)
        columns.user = try ColumnFile.values(file(Column.user.rawValue), count: count)
        columns.previous = try ColumnFile.values(file(Column.previous.rawValue), count: count)
        columns.group = try ColumnFile.values(file(Column.group.rawValue), count: count)
        for path in reading.sorted() where path < paths {
            columns.attributes[path] = try ColumnFile.values(file(attributeFile(path)), count: count)
        }
        columns.messages = [try MessageIds(directory: directory, count: count)]
        columns.segmentStarts = [0]
        return columns
    }

    /// Writes the columns (and `messageIds`, this segment's, in event order;
    /// nil when the caller writes them) into `directory`.
    func save(_ directory: URL, messageIds: [String]?) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        func file(_ name: String) -> URL { directory.appendingPathComponent(name) }
        try ColumnFile.write(time, to: file(Column.time.rawValue))
        try ColumnFile.write(kind, to: file(Column.kind.rawValue))
        try ColumnFile.write(name, to: file(Column.name.rawValue))
        try ColumnFile.write(anonymous, to: file(Column.anonymous.rawValue))
        try ColumnFile.write(user, to: file(Column.user.rawValue))
        try ColumnFile.write(previous, to: file(Column.previous.rawValue))
        try ColumnFile.write(group, to: file(Column.group.rawValue))
        for (path, values) in attributes.enumerated() { try ColumnFile.write(values, to: file(Self.attributeFile(path))) }
        if let messageIds { try MessageIds.write(messageIds, to: directory) }
    }
}

/// A segment's message ids: their bytes end to end, and where each starts.
final class MessageIds: Sendable {
    private let offsets: Int32
    private let bytes: Int32
    let count: Int

    static let offsetsFile = "message.offsets.u64"
    static let bytesFile = "message.bytes"

    init(directory: URL, count: Int) throws {
        offsets = open(directory.appendingPathComponent(Self.offsetsFile).path, O_RDONLY)
        bytes = open(directory.appendingPathComponent(Self.bytesFile).path, O_RDONLY)
        self.count = count
        guard offsets >= 0, bytes >= 0 else {
            if offsets >= 0 { close(offsets) }
            if bytes >= 0 { close(bytes) }
            throw ColumnStoreError.damaged("\(directory.lastPathComponent) has no message ids")
        }
    }

    deinit {
        close(offsets)
        close(bytes)
    }

    /// The id of the segment's event `index` (positioned reads: safe from any thread).
    func id(_ index: Int) throws -> String {
        guard index >= 0, index < count else { throw ColumnStoreError.damaged("message \(index) of \(count)") }
        var range = (UInt64(0), UInt64(0))
        let read = withUnsafeMutableBytes(of: &range) { pread(offsets, $0.baseAddress, 16, off_t(index * 8)) }
        let start = UInt64(littleEndian: range.0), end = UInt64(littleEndian: range.1)
        // A message id is at most a few hundred bytes (ingestion's limits); anything else is damage.
        guard read == 16, end >= start, end - start <= 1 << 16 else { throw ColumnStoreError.damaged("message offsets of event \(index)") }
        let length = Int(end - start)
        var text = [UInt8](repeating: 0, count: length)
        let got = text.withUnsafeMutableBytes { pread(bytes, $0.baseAddress, length, off_t(start)) }
        guard got == length else { throw ColumnStoreError.damaged("message bytes of event \(index)") }
        return String(decoding: text, as: UTF8.self)
    }

    /// Writes the message ids of `segments`, end to end, into `directory`
    /// (the store merging its segments): their bytes copied, their offsets shifted.
    static func concatenate(_ segments: [(directory: URL, count: Int)], into directory: URL) throws {
        var offsets: [UInt64] = [0]
        var bytes = Data()
        for segment in segments {
            let own = try ColumnFile.values(segment.directory.appendingPathComponent(offsetsFile), count: segment.count + 1, as: UInt64.self)
            let base = UInt64(bytes.count)
            offsets += own.dropFirst().map { $0 + base }
            bytes += try ColumnFile.read(segment.directory.appendingPathComponent(bytesFile), bytes: Int(own.last ?? 0))
        }
        try ColumnFile.write(offsets, to: directory.appendingPathComponent(offsetsFile))
        try bytes.write(to: directory.appendingPathComponent(bytesFile))
    }

    static func write(_ ids: [String], to directory: URL) throws {
        var bytes: [UInt8] = []
        var offsets: [UInt64] = [0]
        offsets.reserveCapacity(ids.count + 1)
        for id in ids {
            bytes.append(contentsOf: id.utf8)
            offsets.append(UInt64(bytes.count))
        }
        try ColumnFile.write(offsets, to: directory.appendingPathComponent(offsetsFile))
        try Data(bytes).write(to: directory.appendingPathComponent(bytesFile))
    }
}
