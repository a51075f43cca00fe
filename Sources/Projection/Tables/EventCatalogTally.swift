import CivilDate
import Foundation
import Funnels
import LibPQ
import LogReading

/// One app's event catalogue counted whole from the job's own read of the
/// app's history (`HistoryTally`): the rows `EventCatalog` counts from the
/// log in SQL, without reading the log a second time. Fields are kept as
/// read (COPY text) and counted by small ids; they are decoded once, when
/// the rows are written, so labels that differ only in how they were read
/// (an event `\N` or empty) come together as SQL's `COALESCE` brings them.
struct EventCatalogTally: HistoryTally, Sendable {
    let app: String
    let columns: [String]
    /// Where the row holds what the catalogue keys on.
    private let version: Int, os: Int, properties: Int
    /// The run's snapshot, when the read may show more (Citus: `LogWindow`): the transaction id's field and the snapshot.
    private let snapshot: (txid: Int, horizon: Int64, pending: Set<Int64>)?
    /// The app's zone, when it is not UTC: its days are cut by the server, as SQL cuts them, and read from `day`.
    private let zone: String?
    private let day: Int?

    private var names = ByteTable()  // "type<tab>event", as read
    private var versions = ByteTable()  // app versions
    private var systems = ByteTable()  // OS names
    private var shapes = ByteTable()  // properties objects
    /// (name, version, OS) ids -> label.
    private var labels: [UInt64: Int32] = [:]
    private var labelParts: [(name: Int32, version: Int32, os: Int32)] = []
    private var days: [UInt64: Seen] = [:]  // (label, day) -> events
    /// Sender (as the senders table keys it: a hash of the user id, else
    /// the anonymous id) and day -> the first of its labels, listed in
    /// `sentLabels` and chained by `sentNext`: four bytes a label, where an
    /// array per sender and day cost a heap object each.
    private var sent: [SenderDay: Int32] = [:]
    private var sentLabels: [Int32] = []
    private var sentNext: [Int32] = []
    private var unescaped: [UInt8] = []
    private var shapeCounts: [UInt64: Seen] = [:]  // (name, version, shape) -> events
    /// Distinct property objects kept before they are left to SQL (an app
    /// whose every event carries its own would hold its log in memory).
    struct ShapeLimit: Sendable {
        var count = 100_000
        var bytes = 32 << 20
    }
    private let shapeLimit: ShapeLimit
    /// The property objects were too many to keep: `EventCatalog` walks this app's in SQL.
    private(set) var shapesLeftToSQL = false
    /// Ids outgrew their packing (two million labels or versions): `EventCatalog` counts the whole app in SQL.
    private(set) var abandoned = false

    struct Seen: Sendable {
        var events = 0
        var persons = 0
        var first = Int64.max
        var last = Int64.min

        mutating func add(_ time: Int64, person: Bool) {
            events += 1
            if person { persons += 1 }
            first = min(first, time)
            last = max(last, time)
        }

        mutating func add(_ other: Seen) {
            events += other.events
            persons += other.persons
            first = min(first, other.first)
            last = max(last, other.last)
        }
    }

    /// Zones whose day is the UTC day wherever they are named: cut here.
    /// Any other is cut by the server: Foundation and PostgreSQL read some
    /// names differently (`CET`, `IST`, `GMT+5`) and may hold other rules.
    static let utc: Set<String> = ["UTC", "Etc/UTC", "GMT", "Etc/GMT"]

    /// For `reader`'s read of `app`, days cut in `zone`; `snapshot`: the run's, on a layout whose reads may show more.
    init(reader: PersonHistoryReader, zone: String, snapshot: Checkpoint?, shapeLimit: ShapeLimit = ShapeLimit()) {
        app = reader.app
        self.shapeLimit = shapeLimit
        self.zone = Self.utc.contains(zone) ? nil : zone
        var columns: [String] = []
        let own = 6 + reader.paths.count
        // context.app.version and context.os.name are often the funnels' breakdowns, read already.
        func column(_ path: String, _ expression: String) -> Int {
            if let index = reader.paths.firstIndex(of: path) { return 6 + index }
            columns.append(expression)
            return own + columns.count - 1
        }
        version = column("context.app.version", "e.context #>> '{app,version}'")
        os = column("context.os.name", "e.context #>> '{os,name}'")
        properties = column("", "e.properties")
        day = self.zone == nil ? nil : column("", #"(e."timestamp" AT TIME ZONE (SELECT current_setting('onramp.catalog_zone')))::date"#)
        if let snapshot {
            self.snapshot = (column("", "e.txid"), snapshot.horizon, Set(snapshot.pending))
        } else {
            self.snapshot = nil
        }
        self.columns = columns
    }

    func bind(_ c: Connection) throws {
        guard let zone else { return }
        try c.query("SELECT set_config('onramp.catalog_zone', $1, true)", [.text(zone)])
    }

    mutating func count(_ row: UnsafeRawBufferPointer, fields: [Range<Int>]) throws {
        guard !abandoned else { return }
        func bytes(_ index: Int) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: row[fields[index]]) }
        if let snapshot {
            guard let txid = Int64(String(decoding: bytes(snapshot.txid), as: UTF8.self)) else {
                throw PostgresError(.unexpectedResult, message: "unreadable transaction id in a history row of app \(app)")
            }
            if txid >= snapshot.horizon || snapshot.pending.contains(txid) { return }
        }
        guard let time = Timestamps.parse(bytes: bytes(5)) else {
            throw PostgresError(.unexpectedResult, message: "unreadable timestamp in a history row of app \(app)")
        }
        // An infinite timestamp (a row loaded by hand) has an infinite day: SQL stores it, this tally does not.
        guard time != .max, time != .min, let day = self.day.map({ Self.day(ofText: bytes($0)) }) ?? Self.utcDay(of: time) else {
            return abandon()
        }
        // The type and the event are side by side in the row: one id for both.
        let name = names.id(of: UnsafeRawBufferPointer(rebasing: row[fields[3].lowerBound..<fields[4].upperBound]))
        let version = versions.id(of: bytes(self.version))
        let os = systems.id(of: bytes(self.os))
        guard let labelKey = Self.pack(name, version, os) else { return abandon() }
        let label: Int32
        if let known = labels[labelKey] {
            label = known
        } else {
            label = Int32(labelParts.count)
            labels[labelKey] = label
            labelParts.append((name, version, os))
        }

        let user = bytes(0)
        let id = CopyText.isNull(user) ? bytes(1) : user
        let sender: Int64
        if CopyText.hasBackslash(id) {
            unescaped.removeAll(keepingCapacity: true)
            CopyText.appendUnescaped(id, to: &unescaped)
            sender = PostgresHash.textExtended(unescaped)
        } else {
            sender = PostgresHash.textExtended(id)
        }
        // A sender counts once a label and day: when first seen under it.
        let firstTime = addSent(label, SenderDay(sender: sender, day: day))
        days[Self.dayKey(label, day), default: Seen()].add(time, person: firstTime)

        guard !shapesLeftToSQL else { return }
        let object = bytes(properties)
        // Only objects with keys carry paths: `{}`, other JSON and \N carry none.
        guard object.count > 2, object[0] == UInt8(ascii: "{") else { return }
        let shape = shapes.id(of: object)
        if shapes.count > shapeLimit.count || shapes.byteCount > shapeLimit.bytes {
            shapesLeftToSQL = true
            shapes = ByteTable()
            shapeCounts = [:]
            return
        }
        guard let shapeKey = Self.pack(name, version, shape) else { return abandon() }
        shapeCounts[shapeKey, default: Seen()].add(time, person: false)
    }

    /// Lists `label` under `key` unless it is there; whether it was listed.
    private mutating func addSent(_ label: Int32, _ key: SenderDay) -> Bool {
        let head = sent[key] ?? -1
        var at = head
        while at >= 0 {
            if sentLabels[Int(at)] == label { return false }
            at = sentNext[Int(at)]
        }
        sent[key] = Int32(sentLabels.count)
        sentLabels.append(label)
        sentNext.append(head)
        return true
    }

    /// Calls `body` with each label listed from `head`, a sender's first of a day.
    private func forEachLabel(sentFrom head: Int32, _ body: (Int32) -> Void) {
        var at = head
        while at >= 0 {
            body(sentLabels[Int(at)])
            at = sentNext[Int(at)]
        }
    }

    /// A label and a day in one key (`days`), and back.
    private static func dayKey(_ label: Int32, _ day: Int32) -> UInt64 {
        UInt64(UInt32(bitPattern: label)) << 32 | UInt64(UInt32(bitPattern: day))
    }

    private static func labelAndDay(of key: UInt64) -> (label: Int32, day: Int32) {
        (Int32(bitPattern: UInt32(key >> 32)), Int32(bitPattern: UInt32(key & 0xFFFF_FFFF)))
    }

    struct SenderDay: Hashable, Sendable {
        let sender: Int64
        let day: Int32
    }

    private mutating func abandon() {
        abandoned = true
        names = ByteTable()
        versions = ByteTable()
        systems = ByteTable()
        shapes = ByteTable()
        labels = [:]
        days = [:]
        sent = [:]
        sentLabels = []
        sentNext = []
        shapeCounts = [:]
    }

    /// The UTC day of a timestamp.
    private static func utcDay(of microseconds: Int64) -> Int32? {
        let day = microseconds / 86_400_000_000 - (microseconds % 86_400_000_000 < 0 ? 1 : 0)
        return Int32(exactly: day)
    }

    /// The day count of a `date` as the server writes it (`2026-11-01`); nil for another form (infinity, BC).
    private static func day(ofText bytes: UnsafeRawBufferPointer) -> Int32? {
        guard bytes.count == 10, bytes[4] == 45, bytes[7] == 45 else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for index in range {
                guard bytes[index] >= 48, bytes[index] <= 57 else { return nil }
                value = value * 10 + Int64(bytes[index] - 48)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10) else { return nil }
        return Int32(exactly: CivilDate.days(year: year, month: month, day: day))
    }

    /// Three ids of at most 21 bits in one key; nil when one is larger.
    private static func pack(_ a: Int32, _ b: Int32, _ c: Int32) -> UInt64? {
        guard a < 1 << 21, b < 1 << 21, c < 1 << 21 else { return nil }
        return UInt64(a) << 42 | UInt64(b) << 21 | UInt64(c)
    }

    /// The labels as SQL keys them: decoded, `\N` as empty, and those read
    /// apart that SQL keys as one (`\N` and an empty string) together.
    struct Labels {
        /// By label: type, event, version, OS.
        var parts: [[String]] = []
        /// By label as read: its label.
        var canonical: [Int32] = []
        /// By label: the key the senders table lists it by.
        var keys: [Int64] = []
        /// Whether some labels came together.
        var merged: Bool { parts.count < canonical.count }
    }

    func labelsAsKeyed() -> Labels {
        var labels = Labels()
        // Keyed by bytes, as the server groups them: Swift's strings compare
        // canonically equivalent spellings (`é` and `e` + U+0301) as equal.
        var index: [[[UInt8]]: Int32] = [:]
        for part in labelParts {
            let (type, event) = typeAndEvent(part.name)
            let label = [type, event, text(versions, part.version), text(systems, part.os)]
            let key = label.map { Array($0.utf8) }
            if let known = index[key] {
                labels.canonical.append(known)
            } else {
                index[key] = Int32(labels.parts.count)
                labels.canonical.append(Int32(labels.parts.count))
                labels.parts.append(label)
            }
        }
        labels.keys = labels.parts.map { PostgresHash.textExtended(Array($0.joined(separator: "\u{1F}").utf8)) }
        return labels
    }

    /// `event_catalog_days`' rows (app, type, event, day, app_version, os_name, events, persons, first_seen, last_seen).
    func dayRows(_ labels: Labels) throws -> BinaryCopyRows {
        var days: [UInt64: Seen] = [:]
        for (key, seen) in self.days {
            let (label, day) = Self.labelAndDay(of: key)
            days[Self.dayKey(labels.canonical[Int(label)], day), default: Seen()].add(seen)
        }
        // Where labels came together, a sender seen under two of them was counted twice: counted again by label.
        var persons: [UInt64: Int] = [:]
        if labels.merged {
            for (senderDay, head) in sent {
                var canonical = Set<Int32>()
                forEachLabel(sentFrom: head) { canonical.insert(labels.canonical[Int($0)]) }
                for label in canonical { persons[Self.dayKey(label, senderDay.day), default: 0] += 1 }
            }
        }
        var rows = BinaryCopyRows()
        for (key, seen) in days {
            let (index, day) = Self.labelAndDay(of: key)
            let label = labels.parts[Int(index)]
            rows.startRow(fields: 10)
            guard rows.append(text: app), rows.append(text: label[0]), rows.append(text: label[1]) else {
                throw PostgresError(.invalidParameter, message: "a label of app \(app) holds a NUL byte")
            }
            rows.append(date: Int64(day))
            guard rows.append(text: label[2]), rows.append(text: label[3]) else {
                throw PostgresError(.invalidParameter, message: "a version or OS name of app \(app) holds a NUL byte")
            }
            rows.append(int64: Int64(seen.events))
            rows.append(int64: Int64(labels.merged ? persons[key] ?? 0 : seen.persons))
            rows.append(timestamp: seen.first)
            rows.append(timestamp: seen.last)
        }
        return rows
    }

    /// Sends `event_catalog_senders`' rows (app, day, sender, keys) through
    /// `writer`, a binary COPY, a piece at a time: at ten million events an
    /// app has hundreds of thousands, not to be held rendered at once.
    func sendSenders(_ labels: Labels, through writer: inout CopyWriter) throws {
        // In the primary key's order: the index grows at its end.
        let order = sent.keys.sorted { ($0.day, $0.sender) < ($1.day, $1.sender) }
        var rows = BinaryCopyRows(capacity: 1 << 20)
        var keys: [Int64] = []
        for senderDay in order {
            keys.removeAll(keepingCapacity: true)
            forEachLabel(sentFrom: sent[senderDay] ?? -1) { keys.append(labels.keys[Int(labels.canonical[Int($0)])]) }
            keys.sort()
            keys.removeRepeats()
            rows.startRow(fields: 4)
            _ = rows.append(text: app)
            rows.append(date: Int64(senderDay.day))
            rows.append(int64: senderDay.sender)
            rows.append(int8Array: keys)
            if rows.bytes.count >= 1 << 20 {
                try writer.writePart(rows)
                rows.removeSent()
            }
        }
        try writer.writePart(rows)
        try writer.endBinary()
    }

    var hasSenders: Bool { !sent.isEmpty }

    /// The distinct property objects (app, type, event, app_version, properties, events, first_seen, last_seen) whose paths SQL walks.
    func shapeRows() throws -> BinaryCopyRows {
        var rows = BinaryCopyRows()
        for (key, seen) in shapeCounts {
            let name = Int32(key >> 42), version = Int32(key >> 21 & 0x1F_FFFF), shape = Int32(key & 0x1F_FFFF)
            let object = shapes.withBytes(of: shape) { CopyText.field($0) } ?? "{}"
            rows.startRow(fields: 8)
            let (type, event) = typeAndEvent(name)
            guard rows.append(text: app), rows.append(text: type), rows.append(text: event),
                  rows.append(text: text(versions, version)), rows.append(jsonb: object)
            else { throw PostgresError(.invalidParameter, message: "a property of app \(app) holds a NUL byte") }
            rows.append(int64: Int64(seen.events))
            rows.append(timestamp: seen.first)
            rows.append(timestamp: seen.last)
        }
        return rows
    }
}

extension EventCatalogTally {
    /// A version's or OS name's text, `\N` as empty.
    private func text(_ table: ByteTable, _ value: Int32) -> String { table.withBytes(of: value) { CopyText.field($0) } ?? "" }

    /// The type and the event of a name id (read side by side), `\N` as empty.
    private func typeAndEvent(_ name: Int32) -> (String, String) {
        names.withBytes(of: name) { bytes in
            let tab = bytes.firstIndex(of: 9) ?? bytes.count
            let type = CopyText.field(UnsafeRawBufferPointer(rebasing: bytes[..<tab])) ?? ""
            guard tab < bytes.count else { return (type, "") }
            return (type, CopyText.field(UnsafeRawBufferPointer(rebasing: bytes[(tab + 1)...])) ?? "")
        }
    }
}

/// Byte strings by small ids, in one buffer, found by their hash: no key is
/// built for a lookup, as a dictionary of arrays would for every row.
struct ByteTable: Sendable {
    private var storage: [UInt8] = []
    private var ranges: [Range<Int>] = []
    /// Hash -> the last id with it; `previous` chains the others.
    private var byHash: [UInt64: Int32] = [:]
    private var previous: [Int32] = []
    private var last: Int32?

    var count: Int { ranges.count }
    var byteCount: Int { storage.count }

    /// The id of `bytes`, given a new one when they were never seen.
    mutating func id(of bytes: UnsafeRawBufferPointer) -> Int32 {
        // A person's events are mostly read one after another: the last id is tried first.
        if let last, ranges[Int(last)].count == bytes.count, withBytes(of: last, { $0.elementsEqual(bytes) }) { return last }
        let id = lookUp(bytes)
        last = id
        return id
    }

    private mutating func lookUp(_ bytes: UnsafeRawBufferPointer) -> Int32 {
        let hash = FNV1a.hash(bytes: bytes)
        var candidate = byHash[hash] ?? -1
        while candidate >= 0 {
            let range = ranges[Int(candidate)]
            if range.count == bytes.count, withBytes(of: candidate, { $0.elementsEqual(bytes) }) { return candidate }
            candidate = previous[Int(candidate)]
        }
        let id = Int32(ranges.count)
        ranges.append(storage.count..<storage.count + bytes.count)
        storage.append(contentsOf: bytes)
        previous.append(byHash[hash] ?? -1)
        byHash[hash] = id
        return id
    }

    func withBytes<T>(of id: Int32, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        try storage.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[ranges[Int(id)]])) }
    }
}

extension Array where Element == Int64 {
    /// Drops the repeats of a sorted array in place, its buffer kept: one
    /// array serves every sender's row, where a copy per row cost a heap object each.
    fileprivate mutating func removeRepeats() {
        guard count > 1 else { return }
        var kept = 1
        for index in 1..<count where self[index] != self[kept - 1] {
            self[kept] = self[index]
            kept += 1
        }
        removeLast(count - kept)
    }
}
