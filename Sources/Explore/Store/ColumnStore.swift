import EventLog
import Foundation
import Funnels
import LibPQ
import LogReading

/// One app's events as columns on local disk (`EventColumns`), kept up to
/// date from the log at every query: a query reads what was added since the
/// last one (by transaction, as the nightly job reads a day) and the columns
/// of everything before it, so its cost follows the app's onboarding
/// events, not the JSON of its whole history. It is a cache: deleting it
/// costs one read of the app's history, and a log it does not recognise
/// (another database, a restored one) makes it start again.
///
/// It holds the attribute paths it was asked for (and those of the
/// configured funnels); a query reading a new path reads the history again
/// with it.
struct ColumnStore {
    struct Manifest: Codable, Equatable {
        static let format = 3
        var format = Manifest.format
        var database: String
        var app: String
        var checkpoint: Checkpoint
        var paths: [String]
        /// Segment directory names and their event counts.
        var segments: [Segment]
        var nextSegment = 0
        /// Valid bytes of each string table file, and its strings.
        var tableBytes: [String: Int] = [:]
        var tableCounts: [String: Int] = [:]

        struct Segment: Codable, Equatable {
            var name: String
            var count: Int
        }
    }

    /// What a refresh did, for the caller to say.
    struct Refresh: Sendable {
        var events: Int
        var newEvents: Int
        var rebuilt: Bool
        var seconds: Double
    }

    let directory: URL
    let app: String

    /// At most this many segments; more are merged into one.
    static let maximumSegments = 8

    init(root: URL, database: String, app: String) {
        self.app = app
        directory = root.appendingPathComponent(Self.key(database)).appendingPathComponent(Self.key(app))
    }

    /// A file-system-safe name for `text`: FNV-1a in hex, plus the text's safe characters for a reader.
    static func key(_ text: String) -> String {
        let readable = String(text.unicodeScalars.filter { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) }.prefix(24))
        return "\(readable)-\(String(FNV1a.hash(text), radix: 16))"
    }

    /// Who the log is and who reads it: the database's name and object id on
    /// its server, and the login. Each login's stores are its own, since each
    /// reads only the apps it is granted (docs/access.md): two logins on one
    /// machine never share a file.
    static func databaseIdentity(_ c: Connection) throws -> String {
        let row = try c.query(
            """
            SELECT current_database(), (SELECT oid::text FROM pg_database WHERE datname = current_database()),
                   coalesce(inet_server_addr()::text, 'local'), coalesce(inet_server_port(), 0)::text, session_user::text
            """
        ).first
        guard let row else { throw ColumnStoreError.damaged("no database identity") }
        return try (0..<5).map { try row.decode(String.self, at: $0) }.joined(separator: "/")
    }

    /// The log the store was read from: its database, and how many erasures
    /// the app has had and how many of its months were archived or restored.
    /// After one, the store holds events the log no longer has (or lacks
    /// some it has again), and is cleared and read again (docs/privacy.md,
    /// docs/lifecycle.md). The app's own counts: a total over the login's
    /// apps could come back to its old value when a grant is revoked.
    static func logIdentity(_ c: Connection, app: String) throws -> String {
        let row = try c.query(
            """
            SELECT (SELECT coalesce(sum(erasures), 0)::int8 FROM analytics.app_erasures WHERE app = $1),
                   (SELECT count(*) FROM analytics.archive_changes WHERE app = $1)
            """, [.text(app)]
        ).first
        let erasures = try row?.decode(Int.self, at: 0) ?? 0, archives = try row?.decode(Int.self, at: 1) ?? 0
        return try databaseIdentity(c) + "/erasures \(erasures)" + (archives == 0 ? "" : "/archive changes \(archives)")
    }

    /// Brings the store up to the log as `c` sees it, holding at least
    /// `paths` (and `keeping`, when it is read from the log again); then
    /// hands `body` the store as it now is, whose columns are read from disk
    /// only if `body` asks (an answer already counted needs none). `c` must
    /// be in a REPEATABLE READ transaction, so the checkpoint is what was read.
    /// Runs `body` holding the store's lock (waiting for another query's
    /// refresh at most until `deadline`): `withColumns` and `clear` are
    /// called inside it, the transaction they read in begun inside it too.
    func locked<T>(until deadline: Deadline?, _ body: () throws -> T) throws -> T {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let lock = try FileLock.acquire(directory.appendingPathComponent("lock"), until: deadline)
        defer { lock.release() }
        return try body()
    }

    func withColumns<T>(
        _ c: Connection, paths wanted: Set<String>, keeping: Set<String> = [], deadline: Deadline? = nil, _ body: (Stored) throws -> T
    ) throws -> (T, Refresh) {
        let started = Date()
        let database = try Self.logIdentity(c, app: app)
        // On a replica, the snapshot names no running transaction: its pending ones are found from the rows.
        let current = try c.query("SELECT pg_is_in_recovery()").scalar(Bool.self)
            ? try Checkpoint.unseen(c, app: app) : try Checkpoint.settled(c, layout: try EventLogLayout.read(c))
        var manifest = loadManifest()
        var paths = wanted.union(keeping)
        if let stored = manifest, stored.database == database, stored.app == app { paths.formUnion(stored.paths) }
        if let stored = manifest,
           stored.database != database || stored.app != app || stored.checkpoint.horizon > current.horizon || !wanted.isSubset(of: stored.paths) {
            manifest = nil
        }
        var state: State
        if let manifest, let names = try? StringTable.load(tableFile("names"), bytes: manifest.tableBytes["names"] ?? 0) {
            state = State(manifest: manifest, names: names)
        } else {
            manifest = nil
            try clear()
            state = State(empty: Manifest(database: database, app: app, checkpoint: .start, paths: paths.sorted(), segments: []))
        }
        let rebuilt = manifest == nil
        try deadline?.check()
        let window = LogWindow(from: rebuilt ? .start : state.manifest.checkpoint, to: current)
        let newEvents = try readNew(c, window: window, into: &state, deadline: deadline)
        state.manifest.checkpoint = current
        // The manifest too when nothing was new: the next query's read starts from here.
        try save(&state)
        if state.manifest.segments.count > Self.maximumSegments { try compact(&state) }
        let events = state.manifest.segments.map(\.count).reduce(0, +)
        let refresh = Refresh(events: events, newEvents: newEvents, rebuilt: rebuilt, seconds: Date().timeIntervalSince(started))
        let value = try body(Stored(store: self, manifest: state.manifest, names: state.tables.names, events: events))
        return (value, refresh)
    }

    /// The store after its refresh: how many events it holds, and its columns on request.
    struct Stored {
        let store: ColumnStore
        let manifest: Manifest
        let names: StringTable
        let events: Int

        /// The columns, of the attributes only `paths`, read from disk.
        func snapshot(paths: Set<String>) throws -> Snapshot {
            let reading = Set(manifest.paths.indices.filter { paths.contains(manifest.paths[$0]) })
            let columns = try store.columns(manifest, reading: reading)
            let values = try manifest.paths.indices.map { try reading.contains($0) ? store.valueTable($0, manifest) : nil }
            let idsFile = store.tableFile("ids"), idsBytes = manifest.tableBytes["ids"] ?? 0
            guard columns.count == events else { throw ColumnStoreError.damaged("the segments hold \(columns.count) events, not \(events)") }
            try columns.checkNumbers(names: names.count, ids: manifest.tableCounts["ids"] ?? 0, values: values.map { $0?.count })
            return Snapshot(
                columns: columns, names: names, values: values, paths: manifest.paths, idCount: manifest.tableCounts["ids"] ?? 0,
                ids: { try StringTable.load(idsFile, bytes: idsBytes) })
        }
    }

    /// The columns and their string tables, as a query reads them: the
    /// values of the attributes it reads; the identifiers (only a tie
    /// between two users of a device needs their text) when asked.
    struct Snapshot: Sendable {
        let columns: EventColumns
        let names: StringTable
        /// Per stored path; nil for a path the query does not read.
        let values: [StringTable?]
        let paths: [String]
        /// How many identifiers are numbered: persons are numbers below it.
        let idCount: Int
        let ids: @Sendable () throws -> StringTable
    }

    /// The string tables; identifiers and attribute values are read when
    /// new events are numbered into them, the names always.
    struct Tables: Sendable {
        var names = StringTable()
        var ids: StringTable?
        var values: [StringTable?] = []
    }

    private struct State {
        var manifest: Manifest
        var tables = Tables()
        /// The segment read since the manifest, not yet written.
        var pending: (columns: EventColumns, messageIds: [String])?

        /// A store as its manifest describes it, its names read.
        init(manifest: Manifest, names: StringTable) {
            self.manifest = manifest
            tables.names = names
            tables.values = manifest.paths.indices.map { _ in nil }
        }

        /// A store with nothing in it yet.
        init(empty manifest: Manifest) {
            self.manifest = manifest
            tables.ids = StringTable()
            tables.values = manifest.paths.indices.map { _ in StringTable() }
        }
    }

    private var manifestFile: URL { directory.appendingPathComponent("manifest.json") }

    private func loadManifest() -> Manifest? {
        guard let data = try? Data(contentsOf: manifestFile), let manifest = try? JSONDecoder().decode(Manifest.self, from: data),
              manifest.format == Manifest.format
        else { return nil }
        return manifest
    }

    /// Every segment's columns, of the attributes only those numbered in `reading`.
    func columns(_ manifest: Manifest, reading: Set<Int>) throws -> EventColumns {
        var columns = EventColumns(paths: manifest.paths.count)
        for segment in manifest.segments {
            columns.append(try EventColumns.load(
                directory.appendingPathComponent(segment.name), count: segment.count, paths: manifest.paths.count, reading: reading))
        }
        return columns
    }

    func valueTable(_ index: Int, _ manifest: Manifest) throws -> StringTable {
        try StringTable.load(tableFile("values-\(index)"), bytes: manifest.tableBytes["values-\(index)"] ?? 0)
    }

    /// Every table, before new events are numbered into them.
    private func loadAllTables(_ state: inout State) throws {
        if state.tables.ids == nil {
            state.tables.ids = try StringTable.load(tableFile("ids"), bytes: state.manifest.tableBytes["ids"] ?? 0)
        }
        for index in state.tables.values.indices where state.tables.values[index] == nil {
            state.tables.values[index] = try valueTable(index, state.manifest)
        }
    }

    func tableFile(_ name: String) -> URL { directory.appendingPathComponent("\(name).strings") }

    /// Forgets everything the store holds (the next refresh reads the log
    /// whole): the manifest first, so a clear cut short leaves no manifest
    /// vouching for files that are gone.
    func clear() throws {
        try? FileManager.default.removeItem(at: manifestFile)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names where name != "lock" {
            try FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
    }

    /// Reads the app's events in `window` into a new pending segment;
    /// returns how many.
    private func readNew(_ c: Connection, window: LogWindow, into state: inout State, deadline: Deadline?) throws -> Int {
        let paths = state.manifest.paths
        try ReadScope.bind(c, app: app, paths: paths)
        try window.bind(c)
        let sql = """
            COPY (SELECT e.type, e.event, e.anonymous_id, e.user_id, e."timestamp", e.message_id, e.previous_id, e.group_id\(ReadScope.columns(paths))
                  FROM analytics.event_log e WHERE e.app = \(ReadScope.app) AND \(LogWindow.condition)) TO STDOUT (FORMAT binary)
            """
        var columns = EventColumns(paths: paths.count)
        var messageIds: [String] = []
        var row = BinaryCopyFields()
        var kinds: [String: UInt8] = [:]
        for (index, kind) in EventColumns.kinds.enumerated() { kinds[kind.rawValue] = UInt8(index) }
        // Numbered in local tables, loaded at the first new event (most refreshes have none).
        var loaded = false
        var ids = StringTable(), values: [StringTable] = []
        _ = try c.copyOut(sql) { message in
            guard try row.read(message) else { return }
            if !loaded {
                try loadAllTables(&state)
                ids = state.tables.ids ?? StringTable()
                values = state.tables.values.map { $0 ?? StringTable() }
                state.tables.ids = nil
                state.tables.values = []
                loaded = true
            }
            guard row.count == 8 + paths.count, let type = row.text(0), let kind = kinds[type], let time = row.timestamp(4),
                  let messageId = row.text(5)
            else {
                throw PostgresError(.unexpectedResult, message: "unreadable event row for the explore store of app \(app)")
            }
            columns.kind.append(kind)
            columns.name.append(state.tables.names.number(row.text(1)))
            columns.anonymous.append(ids.number(row.text(2)))
            columns.user.append(ids.number(row.text(3)))
            columns.previous.append(ids.number(row.text(6)))
            columns.group.append(ids.number(row.text(7)))
            columns.time.append(time)
            messageIds.append(messageId)
            for path in paths.indices {
                columns.attributes[path].append(values[path].number(row.text(8 + path)))
            }
            if messageIds.count & 0xFFFF == 0 {
                deadline?.control?.read(messageIds.count)
                try deadline?.check()  // a cancel stops the COPY here
            }
        }
        if loaded {
            state.tables.ids = ids
            state.tables.values = values
        }
        guard !messageIds.isEmpty else { return 0 }
        columns.segmentStarts = []
        state.pending = (columns, messageIds)
        return messageIds.count
    }

    /// Writes the pending segment and the tables, then the manifest that vouches for them.
    private func save(_ state: inout State) throws {
        if let pending = state.pending {
            let name = "segment-\(state.manifest.nextSegment)"
            state.manifest.nextSegment += 1
            let segment = directory.appendingPathComponent(name)
            try? FileManager.default.removeItem(at: segment)
            try pending.columns.save(segment, messageIds: pending.messageIds)
            state.manifest.segments.append(.init(name: name, count: pending.columns.count))
            state.pending = nil
        }
        var bytes = state.manifest.tableBytes, counts = state.manifest.tableCounts
        func save(_ table: inout StringTable?, _ name: String) throws {
            guard var loaded = table else { return }
            bytes[name] = try loaded.save(tableFile(name), bytes: bytes[name] ?? 0)
            counts[name] = loaded.count
            table = loaded
        }
        var names: StringTable? = state.tables.names
        try save(&names, "names")
        state.tables.names = names ?? state.tables.names
        try save(&state.tables.ids, "ids")
        for index in state.tables.values.indices { try save(&state.tables.values[index], "values-\(index)") }
        state.manifest.tableBytes = bytes
        state.manifest.tableCounts = counts
        try writeManifest(state.manifest)
        removeUnlisted(state.manifest)
    }

    /// Segments the manifest does not list: left by a merge or a refresh cut short.
    private func removeUnlisted(_ manifest: Manifest) {
        let listed = Set(manifest.segments.map(\.name))
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names where name.hasPrefix("segment-") && !listed.contains(name) {
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
    }

    private func writeManifest(_ manifest: Manifest) throws {
        try ColumnFile.replace(manifestFile, with: try JSONEncoder().encode(manifest))
    }

    /// Merges every segment into one, so a store refreshed often stays a few files.
    private func compact(_ state: inout State) throws {
        let columns = try self.columns(state.manifest, reading: Set(state.manifest.paths.indices))
        let name = "segment-\(state.manifest.nextSegment)"
        state.manifest.nextSegment += 1
        let segment = directory.appendingPathComponent(name)
        try columns.save(segment, messageIds: nil)
        try MessageIds.concatenate(state.manifest.segments.map { (directory.appendingPathComponent($0.name), $0.count) }, into: segment)
        state.manifest.segments = [.init(name: name, count: columns.count)]
        try writeManifest(state.manifest)
        removeUnlisted(state.manifest)
    }
}
