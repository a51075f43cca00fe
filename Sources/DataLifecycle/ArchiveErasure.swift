import Foundation
public import LibPQ

/// An erasure reaching the archive (docs/lifecycle.md, docs/privacy.md):
/// every archive file holding the person is written again without their
/// messages, found through the files' indexes of keyed hashes, not by
/// reading every file; and the erasure's keyed hashes are appended to the
/// journal in the archive directory, outside the database, for
/// `onramp privacy reapply` after a backup is restored.
///
/// A file is replaced by a new one under a new name, the manifest then
/// written to name it, and only then the old file removed: killed at any
/// point, the manifest names whole files that verify, and a file it no
/// longer names (the person's old copy) is removed by the next erasure or
/// archive run in that month (`MonthDirectory.sweep`).
public struct ArchiveErasure: Sendable {
    public var app: String
    public var requestId: Int64
    /// Every id of the persons erased (users, devices, and the ids asked for).
    public var ids: Set<String>
    /// Their user ids: an archived message sent with one also names a device
    /// of theirs, erased too unless the device is linked to another user.
    public var users: Set<String>
    public var suppressed: Bool
    public var directory: String

    public init(app: String, requestId: Int64, ids: Set<String>, users: Set<String>, suppressed: Bool, directory: String) {
        self.app = app
        self.requestId = requestId
        self.ids = ids
        self.users = users
        self.suppressed = suppressed
        self.directory = directory
    }

    public struct Outcome: Sendable, Equatable {
        public var files = 0
        public var messages = 0
        public var months: [String] = []
    }

    public func run(_ c: Connection) throws -> Outcome {
        var ids = ids
        var hashes = try Self.hashes(c, app: app, ids: ids)
        try Journal(directory: directory).append(
            Journal.Entry(requestId: requestId, app: app, at: Timestamps.format(microseconds: Int64(Date().timeIntervalSince1970 * 1_000_000)),
                          suppressed: suppressed, idHashes: hashes.keys.sorted()))
        var outcome = Outcome()
        for month in try MonthDirectory.months(in: directory) {
            var (manifest, _) = try ArchiveManifest.load(directory: directory, month: month)
            let base = "\(directory)/\(month)"
            try MonthDirectory.sweep(base, manifest: manifest)
            // The files holding any of the ids, and the devices their messages
            // add, until no file adds one.
            var holding: [Int: Set<String>] = [:]
            while true {
                for (position, file) in manifest.files.enumerated() where file.app == app {
                    let index = try IdIndex.read("\(base)/\(file.idIndex)")
                    if !index.isDisjoint(with: hashes.keys) { holding[position] = index }
                }
                var seen = Set<String>()
                for position in holding.keys {
                    try Self.messages(in: "\(base)/\(manifest.files[position].path)") { message, _ in
                        if let user = message.userId, users.contains(user), let device = message.anonymousId, !ids.contains(device) {
                            seen.insert(device)
                        }
                    }
                }
                let devices = try theirs(c, seen: seen, manifest: manifest, base: base)
                guard !devices.isEmpty else { break }
                ids.formUnion(devices)
                hashes.merge(try Self.hashes(c, app: app, ids: devices)) { first, _ in first }
            }
            guard !holding.isEmpty else { continue }
            var replaced: [String] = []
            for (position, index) in holding.sorted(by: { $0.key < $1.key }) {
                var file = manifest.files[position]
                let stem = "\(MonthArchive.pathName(app))/\(file.day).r\(requestId)"
                let writer = try GzipWriter(path: "\(base)/\(stem).tsv.gz")
                try writer.writeHeader(ArchiveRow.header)
                var removed = 0
                do {
                    try Self.messages(in: "\(base)/\(file.path)") { message, line in
                        if [message.userId, message.anonymousId, message.previousId].contains(where: { $0.map(ids.contains) ?? false }) {
                            removed += 1
                        } else {
                            try writer.writeLine(line)
                        }
                    }
                } catch {
                    writer.abandon()
                    throw error
                }
                let written = try writer.finish()
                let indexSHA = try IdIndex.write("\(base)/\(stem).ids", hashes: index.subtracting(hashes.keys))
                replaced += [file.path, file.idIndex]
                file.path = "\(stem).tsv.gz"
                file.idIndex = "\(stem).ids"
                file.messages = written.lines
                file.contentSHA256 = written.contentSHA256
                file.idIndexSHA256 = indexSHA
                manifest.files[position] = file
                outcome.files += 1
                outcome.messages += removed
            }
            manifest.messages = manifest.files.reduce(0) { $0 + $1.messages }
            manifest.erasures.append(requestId)
            let sha = try manifest.write(directory: directory)
            try MonthArchive.syncDirectory(base)
            for path in replaced { unlink("\(base)/\(path)") }
            try c.query(
                "UPDATE archived_months SET manifest_sha256 = $2, messages = $3 WHERE month = $1::date",
                [.text("\(month)-01"), .text(sha), .int(Int64(manifest.messages))])
            outcome.months.append(month)
        }
        return outcome
    }

    /// Of the devices `seen` with the erased users in the archive, those that
    /// are theirs by the log's rule (docs/funnels.md, "Persons"): first seen
    /// with one of them, in every archived file that holds the device, and
    /// not linked by the log to another user.
    private func theirs(_ c: Connection, seen: Set<String>, manifest: ArchiveManifest, base: String) throws -> Set<String> {
        guard !seen.isEmpty else { return [] }
        let hashes = try Self.hashes(c, app: app, ids: seen)
        var first: [String: (time: String, user: String)] = [:]
        for file in manifest.files where file.app == app {
            guard !(try IdIndex.read("\(base)/\(file.idIndex)")).isDisjoint(with: hashes.keys) else { continue }
            try Self.messages(in: "\(base)/\(file.path)") { message, _ in
                guard let user = message.userId, let time = message.timestamp else { return }
                for device in [message.anonymousId, message.previousId].compactMap({ $0 }) where seen.contains(device) {
                    // The log's times in UTC, as the archive writes them, order as text; user ids as bytes.
                    if let known = first[device],
                       known.time < time || (known.time == time && !user.utf8.lexicographicallyPrecedes(known.user.utf8)) { continue }
                    first[device] = (time, user)
                }
            }
        }
        let candidates = Set(first.filter { users.contains($0.value.user) }.keys)
        return candidates.subtracting(try Self.linkedElsewhere(c, app: app, devices: candidates, users: users))
    }

    /// The keyed hash (hex) of each id, under the log's key: hash -> id.
    static func hashes(_ c: Connection, app: String, ids: Set<String>) throws -> [String: String] {
        var hashes: [String: String] = [:]
        for row in try c.query(
            "SELECT g.id, encode(onramp_keyed_hash($1, $2, g.id), 'hex') FROM unnest($3::text[]) AS g(id)",
            [.text(app), .text(IdIndex.kind), .textArray(ids.sorted())]
        ).rows {
            hashes[try row.decode(String.self, at: 1)] = try row.decode(String.self, at: 0)
        }
        return hashes
    }

    /// Those of `devices` the log links to a user not among `users`: theirs, not the erased person's.
    static func linkedElsewhere(_ c: Connection, app: String, devices: Set<String>, users: Set<String>) throws -> Set<String> {
        guard !devices.isEmpty else { return [] }
        return Set(try c.query(
            "SELECT anonymous_id FROM identity_links WHERE app = $1 AND anonymous_id = ANY($2::text[]) AND NOT user_id = ANY($3::text[])",
            [.text(app), .textArray(devices.sorted()), .textArray(users.sorted())]
        ).rows.map { try $0.decode(String.self, at: 0) })
    }

    /// The ids a message carries, and its time (the log's text, which orders as time does).
    struct Ids {
        var userId: String?
        var anonymousId: String?
        var previousId: String?
        var timestamp: String?
    }

    static func messages(in path: String, _ body: (Ids, UnsafeRawBufferPointer) throws -> Void) throws {
        try GzipReader.forEachLine(path) { line in
            let fields = ArchiveRow.fields(line)
            guard fields.count == ArchiveRow.columns.count else { throw ArchiveError.damaged(path, "a line that is not a message") }
            let ids = Ids(
                userId: ArchiveRow.text(line, fields[ArchiveRow.userId]), anonymousId: ArchiveRow.text(line, fields[ArchiveRow.anonymousId]),
                previousId: ArchiveRow.text(line, fields[ArchiveRow.previousId]), timestamp: ArchiveRow.text(line, fields[ArchiveRow.timestamp]))
            try body(ids, line)
        }
    }
}

/// The erasures' journal, `erasures.journal` in the archive directory: a
/// JSON line per erasure with its keyed hashes (docs/privacy.md), appended
/// and synced before any file is rewritten, so a database restored from a
/// backup taken before the erasure can be erased again (`onramp privacy reapply`).
public struct Journal: Sendable {
    public var directory: String
    public init(directory: String) { self.directory = directory }

    public static let fileName = "erasures.journal"

    public struct Entry: Codable, Sendable, Equatable {
        public var requestId: Int64
        public var app: String
        public var at: String
        public var suppressed: Bool
        /// HMAC-SHA256 (hex) of each id under the log's key, as the archive's indexes hold them.
        public var idHashes: [String]
        enum CodingKeys: String, CodingKey {
            case requestId = "request_id", app, at, suppressed
            case idHashes = "id_hashes"
        }
    }

    public func append(_ entry: Entry) throws {
        let path = "\(directory)/\(Self.fileName)"
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var line = try encoder.encode(entry)
        line.append(10)
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ArchiveError.io(path, errno) }
        defer { close(fd) }
        let written = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == line.count, fsync(fd) == 0 else { throw ArchiveError.io(path, errno) }
    }

    public func entries() throws -> [Entry] {
        let path = "\(directory)/\(Self.fileName)"
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ArchiveError.io(path, FileManager.default.fileExists(atPath: path) ? EACCES : ENOENT)
        }
        let decoder = JSONDecoder()
        return try data.split(separator: 10).enumerated().map { number, line in
            do { return try decoder.decode(Entry.self, from: Data(line)) } catch {
                throw ArchiveError.damaged(path, "line \(number + 1) is not an erasure")
            }
        }
    }
}

/// A month's folder in the archive directory.
enum MonthDirectory {
    /// The months (YYYY-MM) with a manifest, oldest first.
    static func months(in directory: String) throws -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
            throw ArchiveError.io(directory, ENOENT)
        }
        return names.filter {
            MonthArchive.firstDay(of: $0) != nil && FileManager.default.fileExists(atPath: "\(directory)/\($0)/\(ArchiveManifest.fileName)")
        }.sorted()
    }

    /// Removes what the manifest does not name: partial files, and the old
    /// copies an erasure killed before it removed them.
    static func sweep(_ base: String, manifest: ArchiveManifest) throws {
        let named = Set(manifest.files.flatMap { [$0.path, $0.idIndex] })
        guard let enumerator = FileManager.default.enumerator(atPath: base) else { return }
        while let path = enumerator.nextObject() as? String {
            guard path.hasSuffix(".tsv.gz") || path.hasSuffix(".ids") || path.hasSuffix(".partial"), !named.contains(path),
                  path != ArchiveManifest.fileName else { continue }
            unlink("\(base)/\(path)")
        }
    }

    /// Writes a small file whole: beside its path, synced, renamed into place.
    static func writeWhole(_ path: String, _ data: Data) throws {
        let partial = path + ".partial"
        let fd = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ArchiveError.io(path, errno) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == data.count, fsync(fd) == 0, close(fd) == 0, rename(partial, path) == 0 else {
            throw ArchiveError.io(path, errno)
        }
    }
}

extension Journal {
    /// The ids of one journal entry a database still holds: what
    /// `onramp privacy reapply` erases again (docs/privacy.md).
    public struct Match: Sendable, Equatable {
        public var entry: Entry
        /// Ids sent as a userId somewhere in the app's log or links.
        public var userIds: [String]
        /// The others (anonymous and previous ids).
        public var anonymousIds: [String]
    }

    /// Hashes every id the log and the links hold of each app the journal
    /// names, under the database's own key, and returns the entries whose
    /// hashes match some: one pass per app, whatever the entries.
    public static func matches(_ c: Connection, entries: [Entry]) throws -> [Match] {
        var matches: [Match] = []
        for (app, entries) in Dictionary(grouping: entries, by: \.app).sorted(by: { $0.key < $1.key }) {
            var found: [String: (id: String, asUser: Bool)] = [:]
            for row in try c.query(
                """
                SELECT s.hash, s.id, s.as_user FROM (
                    SELECT encode(onramp_hmac(k.inner_pad, k.outer_pad, $1, $2, i.id), 'hex') AS hash, i.id, i.as_user
                    FROM (SELECT id, bool_or(as_user) AS as_user FROM (
                              SELECT user_id AS id, true AS as_user FROM events WHERE app = $1 AND user_id IS NOT NULL
                              UNION ALL SELECT anonymous_id, false FROM events WHERE app = $1 AND anonymous_id IS NOT NULL
                              UNION ALL SELECT previous_id, false FROM events WHERE app = $1 AND previous_id IS NOT NULL
                              UNION ALL SELECT user_id, true FROM identity_links WHERE app = $1
                              UNION ALL SELECT anonymous_id, false FROM identity_links WHERE app = $1) a
                          GROUP BY id) i
                    CROSS JOIN privacy_key k) s
                WHERE s.hash = ANY($3::text[])
                """, [.text(app), .text(IdIndex.kind), .textArray(Array(Set(entries.flatMap(\.idHashes))))]
            ).rows {
                found[try row.decode(String.self, at: 0)] = (try row.decode(String.self, at: 1), try row.decode(Bool.self, at: 2))
            }
            for entry in entries {
                let ids = entry.idHashes.compactMap { found[$0] }
                guard !ids.isEmpty else { continue }
                matches.append(Match(
                    entry: entry, userIds: ids.filter(\.asUser).map(\.id).sorted(), anonymousIds: ids.filter { !$0.asUser }.map(\.id).sorted()))
            }
        }
        return matches
    }
}
