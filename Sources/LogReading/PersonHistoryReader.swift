package import Foundation
package import Funnels
package import LibPQ

/// Streams every event of a set of persons (or of everyone) of one app and
/// hands each person's whole timeline to the caller, without the log ever
/// being in memory and without PostgreSQL sorting it.
///
/// The rows come unsorted through `COPY (…) TO STDOUT`, and each line, as it
/// arrives, is appended undecoded to one of `partitions` spill files chosen by
/// a hash of its person (of a group's member: of their first group,
/// `LinkedPersons`). Then each file, a fraction of the log, is read back,
/// grouped by person and handed over. A person-order sort in the server took
/// most of a rebuild's database time and, behind a cursor, ran on one core
/// while the job waited; here the server only scans, and the job's spilling
/// keeps pace with it.
package struct PersonHistoryReader {
    /// Whose events a history row goes to, besides its own id: the person
    /// an id's links lead to (where not itself), and the groups a person is
    /// a member of (`HistoryUnit`), whose timelines get the person's
    /// events too.
    package struct Identities: Sendable {
        /// Id -> the person its events belong to, if not itself.
        package var owners: [String: String] = [:]
        /// Person -> the units of their groups, for the app's funnels counting groups.
        package var groups: [String: [String]] = [:]

        package init(owners: [String: String] = [:], groups: [String: [String]] = [:]) {
            self.owners = owners
            self.groups = groups
        }
    }

    package enum Scope {
        /// Everyone (rebuild), with each linked id's person as
        /// `IdentityLinker.rebuild` found them: the job gives events their
        /// person itself, as they stream in, where PostgreSQL would hash-join
        /// every event of the log against the links (a large share of a
        /// history read).
        case all(Identities)
        /// Persons listed in the `touched_keys` temp table (incremental),
        /// with the person an id's events belong to where it is not the id
        /// itself (`TouchedPersons`), given to them the same way.
        case touched(Identities)
    }

    package let app: String
    /// Dotted paths the app's funnels read (`properties.page`, `context.os.name`).
    package let paths: [String]
    /// Whether some of the app's funnels count groups: its group calls are read for their members.
    package var countsGroups = false

    package init(app: String, paths: [String], countsGroups: Bool = false) {
        self.app = app
        self.paths = paths
        self.countsGroups = countsGroups
    }

    /// Rows per spill file the job aims for: a partition's events are decoded
    /// at once, so this bounds the reader's memory whatever the log's size
    /// (but for a large group, whose partition holds its members' events too).
    package static let eventsPerPartition = 100_000

    /// Phase one: streams the app's events in `scope` into `partitions` spill
    /// files. The connection is free again when this returns.
    package func spill(_ c: Connection, scope: Scope, partitions: Int, spillBuffer: Int) throws -> SpilledHistory {
        var none = NoTally()
        return try spill(c, scope: scope, partitions: partitions, spillBuffer: spillBuffer, tally: &none)
    }

    /// Phase one, with `tally` counting every event as it streams past (its
    /// columns read with the row, and cut off before the row is spilled).
    package func spill(
        _ c: Connection, scope: Scope, partitions: Int, spillBuffer: Int, tally: inout some HistoryTally
    ) throws -> SpilledHistory {
        try ReadScope.bind(c, app: app, paths: paths)
        try tally.bind(c)
        // Buffers take at most ~48 MB together, however many partitions there are.
        let count = max(1, partitions)
        var spill = SpillFiles(count: count, flushAt: min(spillBuffer, max(64 << 10, (48 << 20) / count)))
        do {
            var persons: LinkedPersons
            switch scope {
            case .all(let identities), .touched(let identities): persons = LinkedPersons(identities)
            }
            func handOver(_ line: UnsafeRawBufferPointer) throws {
                try persons.forEachUnit(of: line) { unit, rest, place in
                    try spill.append(unit, rest, partition: Self.partition(of: place, count: spill.count))
                }
            }
            let appended = tally.columns
            let own = 6 + paths.count
            var fields: [Range<Int>] = []
            var line: [UInt8] = []
            try c.copyOut("COPY (\(query(scope, appending: appended))) TO STDOUT") { row in
                guard !appended.isEmpty else { return try handOver(row) }
                CopyText.fieldRanges(of: row, into: &fields)
                guard fields.count == own + appended.count else {
                    throw PostgresError(.unexpectedResult, message: "unreadable history row for app \(app): \(fields.count) fields")
                }
                try tally.count(row, fields: fields)
                // The row as a history read without the tally gives it: up to the tab before the first appended field.
                line.removeAll(keepingCapacity: true)
                line.append(contentsOf: UnsafeRawBufferPointer(rebasing: row[..<(fields[own].lowerBound - 1)]))
                line.append(10)
                try line.withUnsafeBytes { try handOver($0) }
            }
            return try spill.finish()
        } catch {
            spill.remove()
            throw error
        }
    }

    /// Phase two, for one partition (partitions are independent, so they can
    /// be read on several threads): hands over each unit's events (a
    /// person's, or a group's: `HistoryUnit`), grouped,
    /// in no particular order; returns the partition's event count (its
    /// persons': a group's are their copies). A line holding a unit alone
    /// gives it the event of the line before (`LinkedPersons`), decoded once.
    package func forEachPerson(in partition: SpilledHistory.Partition, _ body: (String, [FunnelEvent]) throws -> Void) throws -> Int {
        let lines = try partition.load()
        var fields: [String?] = []
        var persons: [String] = []
        var personIndex: [String: Int] = [:]
        var owners: [Int] = []
        var events: [FunnelEvent] = []
        try lines.withUnsafeBytes { bytes in
            var start = 0
            while start < bytes.count {
                var end = start
                while end < bytes.count && bytes[end] != 10 { end += 1 }
                CopyText.fields(of: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), into: &fields)
                start = end + 1
                let (person, event): (String, FunnelEvent)
                if fields.count == 1, let unit = fields[0], let previous = events.last {
                    (person, event) = (unit, previous)
                } else {
                    (person, event) = try decode(fields)
                }
                if let index = personIndex[person] {
                    owners.append(index)
                } else {
                    personIndex[person] = persons.count
                    owners.append(persons.count)
                    persons.append(person)
                }
                events.append(event)
            }
        }
        // Events grouped by person without comparing strings: a counting sort on the person's number.
        var offsets = [Int](repeating: 0, count: persons.count + 1)
        for owner in owners { offsets[owner + 1] += 1 }
        for index in persons.indices { offsets[index + 1] += offsets[index] }
        var order = [Int](repeating: 0, count: events.count)
        var next = offsets
        for (position, owner) in owners.enumerated() {
            order[next[owner]] = position
            next[owner] += 1
        }
        var timeline: [FunnelEvent] = []
        var read = 0
        for (index, person) in persons.enumerated() {
            timeline.removeAll(keepingCapacity: true)
            for position in order[offsets[index]..<offsets[index + 1]] { timeline.append(events[position]) }
            if !HistoryUnit.isGroup(person) { read += timeline.count }
            try body(person, timeline)
        }
        return read
    }

    private func query(_ scope: Scope, appending appended: [String] = []) -> String {
        let app = ReadScope.app
        // One column per path; the engine reads only these three roots, so the
        // column comes from a fixed list and only the path inside it is data.
        let columns = #"e.message_id, e.type, e.event, e."timestamp""# + ReadScope.columns(paths)
            + appended.map { ", " + $0 }.joined()
        switch scope {
        case .all:
            // The user and the anonymous id, for `LinkedPersons`, as below.
            return "SELECT e.user_id, e.anonymous_id, \(columns) FROM events e WHERE e.app = \(app)"
        case .touched:
            // Two halves instead of one OR: events carrying a touched user id, and
            // anonymous events of a touched (or linked) anonymous id, which the
            // job gives the person `TouchedPersons` resolved (this may be a
            // second session, which sees neither the run's new links nor its
            // identity table). The keys go to the index as one array (`= ANY`),
            // each partition's index walked once in key order. Joined key by
            // key (LATERAL), each key would visit every partition; joined
            // plainly, the planner, not seeing the app (a subquery's value),
            // hash-joins every event of the app; joined to the keys for the
            // person, it guesses a handful of them, probes the index once per
            // key and checks each row against the whole array.
            let keys = "ARRAY(SELECT k.id FROM touched_keys k WHERE k.app = \(app))"
            return """
                SELECT e.user_id, NULL, \(columns) FROM events e
                WHERE e.app = \(app) AND e.user_id = ANY (\(keys))
                UNION ALL
                SELECT NULL, e.anonymous_id, \(columns) FROM events e
                WHERE e.app = \(app) AND e.anonymous_id = ANY (\(keys)) AND e.user_id IS NULL
                """
        }
    }

    private func decode(_ fields: [String?]) throws -> (String, FunnelEvent) {
        guard fields.count == 5 + paths.count, let person = fields[0], let messageId = fields[1], let kind = fields[2],
              let time = fields[4], let timestamp = Timestamps.parse(time)
        else {
            throw PostgresError(.unexpectedResult, message: "unreadable history row for app \(app): \(fields)")
        }
        var attributes = [String: String](minimumCapacity: paths.count)
        for (path, value) in zip(paths, fields[5...]) where value != nil {
            attributes[path] = value
        }
        let event = FunnelEvent(
            messageId: messageId, kind: EventKind(rawValue: kind) ?? .track, name: fields[3], timestamp: timestamp,
            attributes: attributes)
        return (person, event)
    }

    /// FNV-1a of the person's bytes as sent: stable, and with no allocation per row.
    package static func partition(of person: UnsafeRawBufferPointer, count: Int) -> Int {
        guard count > 1 else { return 0 }
        return Int(FNV1a.hash(bytes: person) % UInt64(count))
    }
}

/// A spilled history: per partition, the lines written to its file plus the
/// ones still in memory. `remove()` deletes the files, however the job ends.
package struct SpilledHistory: Sendable {
    package struct Partition: Sendable {
        package let file: URL?
        let tail: [UInt8]

        package func load() throws -> [UInt8] {
            guard let file else { return tail }
            var bytes = [UInt8](try Data(contentsOf: file))
            bytes += tail
            return bytes
        }
    }

    package let partitions: [Partition]
    package let directory: URL

    /// Spill directories are named `onramp-history-<pid>-<uuid>`.
    package static let prefix = "onramp-history-"

    package func remove() {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Removes the spill directories of jobs that are gone: a run killed with
    /// SIGKILL cannot clean up after itself, and the next run should not let
    /// its files pile up. A directory whose process still runs is left alone.
    package static func removeAbandoned(in parent: URL = FileManager.default.temporaryDirectory) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: parent.path) else { return }
        for name in names where name.hasPrefix(prefix) {
            guard let pid = Int32(name.dropFirst(prefix.count).prefix { $0 != "-" }) else { continue }
            if kill(pid, 0) == 0 || errno == EPERM { continue }  // alive (or someone else's)
            try? FileManager.default.removeItem(at: parent.appendingPathComponent(name))
        }
    }
}

/// Turns a history row (`user id, anonymous id, rest…`) into the spilled
/// lines (`unit, rest…`): one for the person its id (the user id, else the
/// anonymous id) belongs to, or the id itself, and one for each group that
/// person is a member of. Units stay in COPY's escaped form, and a linked
/// person or a group is escaped as PostgreSQL escapes it, so all of one
/// unit's rows carry the same bytes and land in the same partition, placed
/// by the unit's bytes but for a member's (below).
///
/// A member's rows are placed by their first group, not by themselves: the
/// group's copy then follows the member's row in the same partition, and is
/// spilled as the unit alone, the event read and decoded once for both
/// (a group's timeline holds every member's events: without this, a
/// company-counting funnel spilled and decoded its app's history twice).
private struct LinkedPersons {
    /// Id -> the person its events belong to, if not itself: the rebuild's
    /// (an app can have hundreds of thousands) or the incremental run's.
    private let owners: [String: String]
    /// Person -> their groups' units, escaped.
    private let groups: [String: [[UInt8]]]
    /// The escaped ids' hashes: most user ids are no key, and are passed on
    /// without being decoded.
    private let hashes: Set<UInt64>
    /// The escaped members' hashes, likewise.
    private let memberHashes: Set<UInt64>
    /// The linked person of the row at hand, escaped.
    private var person: [UInt8] = []

    init(_ identities: PersonHistoryReader.Identities) {
        owners = identities.owners
        hashes = Set(owners.keys.map(Self.escapedHash))
        groups = identities.groups.mapValues { units in
            units.map { unit in
                var escaped: [UInt8] = []
                _ = CopyText.appendEscaped(unit, to: &escaped)
                return escaped
            }
        }
        memberHashes = Set(groups.keys.map(Self.escapedHash))
    }

    private static func escapedHash(_ id: String) -> UInt64 {
        var escaped: [UInt8] = []
        _ = CopyText.appendEscaped(id, to: &escaped)
        return FNV1a.hash(bytes: escaped)
    }

    /// Calls `body` with each unit of the row, the rest of the row (a
    /// newline alone for "the event of the row before, in the same
    /// partition"), and the bytes that place the line in a partition.
    mutating func forEachUnit(
        of line: UnsafeRawBufferPointer,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let userId = CopyText.firstField(of: line)
        let afterUser = UnsafeRawBufferPointer(rebasing: line[min(line.count, userId.count + 1)...])
        let anonymous = CopyText.firstField(of: afterUser)
        let rest = UnsafeRawBufferPointer(rebasing: afterUser[anonymous.count...])
        let id = CopyText.isNull(userId) ? anonymous : userId
        if !CopyText.isNull(id), hashes.contains(FNV1a.hash(bytes: id)), let key = CopyText.field(id), let owner = owners[key] {
            person.removeAll(keepingCapacity: true)
            if CopyText.appendEscaped(owner, to: &person) {
                try person.withUnsafeBytes { person in try handOver(person, rest, owner, body) }
                return
            }
        }
        try handOver(id, rest, nil, body)
    }

    /// Hands the row to `person` (escaped; `decoded` when at hand) and to each of their groups.
    private func handOver(
        _ person: UnsafeRawBufferPointer, _ rest: UnsafeRawBufferPointer, _ decoded: String?,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        guard !groups.isEmpty, memberHashes.contains(FNV1a.hash(bytes: person)),
              let key = decoded ?? CopyText.field(person), let units = groups[key], let first = units.first
        else { return try body(person, rest, person) }
        try first.withUnsafeBytes { first in
            try body(person, rest, first)
            try Self.newline.withUnsafeBytes { try body(first, $0, first) }
        }
        for unit in units.dropFirst() { try unit.withUnsafeBytes { try body($0, rest, $0) } }
    }

    /// The rest of a line that repeats the event of the line before.
    private static let newline: [UInt8] = [10]
}

/// Append-only scratch files, one per partition, buffered in memory and
/// written in pieces of `flushAt` bytes; a partition that never fills its
/// buffer never touches the disk.
private struct SpillFiles {
    let count: Int
    private let flushAt: Int
    private let directory: URL
    private var buffers: [[UInt8]]
    private var handles: [FileHandle?]

    init(count: Int, flushAt: Int) {
        self.count = count
        self.flushAt = flushAt
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "\(SpilledHistory.prefix)\(getpid())-\(UUID().uuidString)")
        buffers = Array(repeating: [], count: count)
        handles = Array(repeating: nil, count: count)
    }

    /// Appends one line given in two pieces (the unit, then the rest, which
    /// may be the newline alone).
    mutating func append(_ head: UnsafeRawBufferPointer, _ tail: UnsafeRawBufferPointer, partition: Int) throws {
        buffers[partition].append(contentsOf: head)
        buffers[partition].append(contentsOf: tail)
        if buffers[partition].count >= flushAt { try flush(partition) }
    }

    private func file(_ partition: Int) -> URL { directory.appendingPathComponent("\(partition)") }

    private mutating func flush(_ partition: Int) throws {
        if handles[partition] == nil {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: file(partition).path, contents: nil) else {
                throw LogReadError(.spill, "cannot create the spill file \(file(partition).path)")
            }
            handles[partition] = try FileHandle(forWritingTo: file(partition))
        }
        try handles[partition]?.write(contentsOf: buffers[partition])
        buffers[partition].removeAll(keepingCapacity: true)
    }

    /// Closes the files; a partition that never reached the disk stays in memory.
    mutating func finish() throws -> SpilledHistory {
        var partitions: [SpilledHistory.Partition] = []
        for index in 0..<count {
            if handles[index] != nil, !buffers[index].isEmpty { try flush(index) }
            try handles[index]?.close()
            partitions.append(SpilledHistory.Partition(file: handles[index] == nil ? nil : file(index), tail: buffers[index]))
            handles[index] = nil
            buffers[index] = []
        }
        return SpilledHistory(partitions: partitions, directory: directory)
    }

    func remove() {
        for handle in handles { try? handle?.close() }
        try? FileManager.default.removeItem(at: directory)
    }
}
