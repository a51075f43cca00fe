import CivilDate
import LogReading
public import Foundation
public import LibPQ

/// A month of the log moved to files (docs/lifecycle.md): its messages
/// written per app and UTC day of receipt as gzip'd rows in the log's text
/// format (`ArchiveRow`) with an index of the ids' keyed hashes, read back
/// and checked, the manifest written, and only then the month recorded and
/// its partition dropped, in one transaction. Killed at any point it loses
/// nothing: files are renamed into place once whole, the manifest once
/// every file has verified, and the partition goes only in the transaction
/// that records the month; a rerun writes the month again.
public struct MonthArchive: Sendable {
    /// YYYY-MM.
    public var month: String
    public var directory: String

    public init(month: String, directory: String) {
        self.month = month
        self.directory = directory
    }

    public struct Outcome: Sendable, Equatable {
        public var month: String
        public var messages: Int
        public var files: Int
        /// Compressed bytes on disk.
        public var bytes: Int
        public var manifestSHA256: String
    }

    /// The month's instants (microseconds since the epoch): its first, and the next month's first.
    static func bounds(of month: String) -> (from: Int64, until: Int64)? {
        guard let firstDay = firstDay(of: month) else { return nil }
        let (y, m, _) = CivilDate.date(days: firstDay)
        let next = CivilDate.days(year: m == 12 ? y + 1 : y, month: m == 12 ? 1 : m + 1, day: 1)
        return (firstDay * 86_400_000_000, next * 86_400_000_000)
    }

    static func firstDay(of month: String) -> Int64? {
        let parts = month.split(separator: "-")
        guard parts.count == 2, parts[0].count == 4, parts[1].count == 2,
              let year = Int64(parts[0]), let number = Int64(parts[1]), (1...12).contains(number) else { return nil }
        return CivilDate.days(year: year, month: number, day: 1)
    }

    /// Months whose whole partition was received before `now` less `keep`
    /// (months and days), oldest first; but a month brought back by
    /// `onramp archive restore` stays until it is archived again by name.
    public static func due(
        _ c: Connection, keepMonths: Int, keepDays: Int, now: Date, includingRestored: Bool = false
    ) throws -> [String] {
        try c.query(
            """
            SELECT to_char(m, 'YYYY-MM') FROM (
                SELECT to_date(substr(c.relname, 9, 4) || substr(c.relname, 14, 2), 'YYYYMM') AS m
                FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'events'::regclass AND c.relname ~ '^events_y[0-9]{4}m[0-9]{2}$') p
            WHERE ((m + interval '1 month')::timestamp AT TIME ZONE 'UTC')
                  <= $3::timestamptz - make_interval(months => $1::int, days => $2::int)
              AND ($4 OR NOT EXISTS (SELECT 1 FROM archive_changes r WHERE r.month = p.m AND r.change = 'restored'
                              AND NOT EXISTS (SELECT 1 FROM archive_changes a WHERE a.month = r.month AND a.change = 'archived' AND a.id > r.id)))
            ORDER BY m
            """, [.int(Int64(keepMonths)), .int(Int64(keepDays)), .timestamp(now), .bool(includingRestored)]
        ).rows.map { try $0.decode(String.self, at: 0) }
    }

    /// Messages in the default partition (outside every month partition)
    /// received before the horizon: the archive leaves them in the log, and says so.
    public static func defaultPartitionMessages(_ c: Connection, keepMonths: Int, keepDays: Int, now: Date) throws -> Int {
        try c.query(
            """
            SELECT count(*) FROM events_default
            WHERE received_at < $3::timestamptz - make_interval(months => $1::int, days => $2::int)
            """, [.int(Int64(keepMonths)), .int(Int64(keepDays)), .timestamp(now)]
        ).scalar(Int.self)
    }

    /// Writes, verifies and records the month, then drops its partition.
    /// `lockTimeout` bounds the wait for the log's lock to drop it (a
    /// running job holds it): past it nothing is dropped, and a rerun does it.
    public func run(_ c: Connection, lockTimeout: String = "10s") throws -> Outcome {
        guard let (from, until) = Self.bounds(of: month) else { throw ArchiveError.refused("month: expected YYYY-MM (got '\(month)')") }
        let base = "\(directory)/\(month)"
        // An archive already written holds what a restore may not have put back (an app left out, messages
        // erased since from the log): archived again, it would be replaced by less. Restore it whole first.
        if FileManager.default.fileExists(atPath: "\(base)/\(ArchiveManifest.fileName)") {
            let (earlier, _) = try ArchiveManifest.load(directory: directory, month: month)
            let held = try c.query(
                "SELECT count(*) FROM events WHERE received_at >= $1 AND received_at < $2", [.microseconds(from), .microseconds(until)]
            ).scalar(Int.self)
            guard held >= earlier.messages else {
                throw ArchiveError.refused(
                    "\(month): its archive in \(directory) holds \(earlier.messages) messages and the log \(held): archiving it again "
                        + "would lose the difference; restore it whole first (onramp archive restore --month \(month))")
            }
        }
        try Self.makeDirectory(base)
        Self.raiseOpenFileLimit()
        var manifest = ArchiveManifest(
            month: month, messages: 0, writtenAt: Timestamps.format(microseconds: Int64(Date().timeIntervalSince1970 * 1_000_000)),
            files: [])
        try c.transaction(isolation: .repeatableRead) { c in
            try c.query("SELECT set_config('timezone', 'UTC', true), set_config('datestyle', 'ISO, YMD', true), set_config('jit', 'off', true)")
            let (files, copied) = try writeFiles(c, base: base, from: from, until: until)
            // Every row PostgreSQL sent is in a file: the files' lines add up to the copy's.
            let written = files.reduce(0) { $0 + $1.messages }
            guard written == copied else {
                throw ArchiveError.refused("\(month): \(written) messages written where the log sent \(copied); nothing was dropped, rerun")
            }
            manifest.files = files
            manifest.messages = files.reduce(0) { $0 + $1.messages }
        }
        try manifest.verify(directory: directory)
        let manifestSHA = try manifest.write(directory: directory)
        try Self.syncDirectory(base)
        // What an earlier run or erasure left that this manifest does not name.
        try MonthDirectory.sweep(base, manifest: manifest)
        let perApp = Dictionary(manifest.files.map { ($0.app, $0.messages) }, uniquingKeysWith: +)
        try c.transaction { c in
            try c.query("SELECT set_config('lock_timeout', $1, true)", [.text(lockTimeout)])
            let held = try c.query(
                "SELECT count(*) FROM events WHERE received_at >= $1 AND received_at < $2", [.microseconds(from), .microseconds(until)]
            ).scalar(Int.self)
            guard held == manifest.messages else {
                throw ArchiveError.refused("\(month): the log now holds \(held) messages where the archive wrote \(manifest.messages); nothing was dropped, rerun")
            }
            try c.query(
                """
                INSERT INTO archived_months (month, directory, manifest_sha256, messages) VALUES ($1::date, $2, $3, $4)
                ON CONFLICT (month) DO UPDATE SET directory = EXCLUDED.directory, manifest_sha256 = EXCLUDED.manifest_sha256,
                    messages = EXCLUDED.messages, archived_at = now()
                """, [.text("\(month)-01"), .text(directory), .text(manifestSHA), .int(Int64(manifest.messages))])
            try c.query(
                """
                INSERT INTO archive_changes (month, app, change, messages)
                SELECT $1::date, a.app, 'archived', a.messages FROM unnest($2::text[], $3::int8[]) AS a(app, messages)
                """, [.text("\(month)-01"), .textArray(perApp.keys.sorted()), .intArray(perApp.keys.sorted().map { Int64(perApp[$0] ?? 0) })])
            do {
                try c.query("SELECT onramp_drop_month_partition($1::date)", [.text("\(month)-01")])
            } catch let error as PostgresError where error.sqlState == "55P03" {
                throw ArchiveError.refused(
                    "\(month): the log was busy past \(lockTimeout) (a running job or long query holds it); the archive is written and verified, nothing was dropped: rerun")
            }
        }
        return Outcome(
            month: month, messages: manifest.messages, files: manifest.files.count,
            bytes: manifest.files.reduce(0) { $0 + Self.size("\(base)/\($1.path)") }, manifestSHA256: manifestSHA)
    }

    /// The month's messages, streamed once (unsorted, as the partition
    /// holds them) into a file per app and day, each row as `COPY` gives it,
    /// and the keyed hashes of the ids of each file into its index.
    /// Returns the files and the rows the copy sent.
    private func writeFiles(_ c: Connection, base: String, from: Int64, until: Int64) throws -> ([ArchiveManifest.File], Int) {
        final class Open {
            let app: String, day: String, writer: GzipWriter
            var ids = Set<String>()
            init(app: String, day: String, writer: GzipWriter) { (self.app, self.day, self.writer) = (app, day, writer) }
        }
        var open: [String: Open] = [:]
        defer { for file in open.values { file.writer.abandon() } }
        let hash = try IdIndex.key(c)
        try c.query("SELECT set_config('onramp.archive_from', $1, true), set_config('onramp.archive_until', $2, true)",
                    [.text(Timestamps.format(microseconds: from)), .text(Timestamps.format(microseconds: until))])
        var fields: [Range<Int>] = []
        fields.reserveCapacity(ArchiveRow.columns.count)
        let copied = try c.copyOutCounting(Self.messagesStatement) { chunk in
            guard chunk.last == 10 else { throw ArchiveError.refused("\(month): a row without its end") }
            let line = UnsafeRawBufferPointer(rebasing: chunk[0..<(chunk.count - 1)])
            ArchiveRow.fields(line, into: &fields)
            guard fields.count == ArchiveRow.columns.count, fields[ArchiveRow.receivedAt].count >= 10,
                  let app = ArchiveRow.text(line, fields[ArchiveRow.app]) else {
                throw ArchiveError.refused("\(month): a row of \(fields.count) fields where the log has \(ArchiveRow.columns.count)")
            }
            let received = fields[ArchiveRow.receivedAt]
            let day = String(decoding: UnsafeRawBufferPointer(rebasing: line[received.lowerBound..<(received.lowerBound + 10)]), as: UTF8.self)
            let key = app + "\u{0}" + day
            let file: Open
            if let known = open[key] {
                file = known
            } else {
                try Self.makeDirectory("\(base)/\(Self.pathName(app))")
                let writer = try GzipWriter(path: "\(base)/\(Self.pathName(app))/\(day).tsv.gz")
                try writer.writeHeader(ArchiveRow.header)
                file = Open(app: app, day: day, writer: writer)
                open[key] = file
            }
            try file.writer.writeTerminatedLine(chunk)
            for id in ArchiveRow.ids(line, fields) { file.ids.insert(id) }
        }
        var files: [ArchiveManifest.File] = []
        var ids: [Set<String>] = []
        for key in open.keys.sorted() {
            guard let file = open.removeValue(forKey: key) else { continue }
            let written: (lines: Int, contentSHA256: String)
            do { written = try file.writer.finish() } catch {
                file.writer.abandon()
                throw error
            }
            let stem = "\(Self.pathName(file.app))/\(file.day)"
            files.append(.init(
                app: file.app, day: file.day, path: "\(stem).tsv.gz", messages: written.lines, contentSHA256: written.contentSHA256,
                idIndex: "\(stem).ids", idIndexSHA256: ""))
            ids.append(file.ids)
        }
        // The indexes on every core, PostgreSQL's idle now: a keyed hash per id of each file.
        let indexes = try Background.mapOnEveryCore(Array(zip(files, ids))) { file, ids in
            try IdIndex.write("\(base)/\(file.idIndex)", hashes: Set(ids.map { hash.hex(app: file.app, kind: IdIndex.kind, id: $0) }))
        }
        for (position, sha) in indexes.enumerated() { files[position].idIndexSHA256 = sha }
        return (files, copied.rows)
    }

    /// Each message as the server stored it, in the log's text format
    /// (`ArchiveRow`), its times in UTC; bounded by settings of the
    /// transaction, as `COPY` takes no parameters, each read in a subquery:
    /// on Citus the coordinator reads it, as the workers know no such setting.
    static let messagesStatement = """
        COPY (
            SELECT e.seq, e.app, e.type, e.message_id, e.event, e.anonymous_id, e.user_id, e."timestamp", e.original_timestamp,
                   e.sent_at, e.received_at, e.properties, e.context, e.traits, e.previous_id, e.group_id
            FROM events e
            WHERE e.received_at >= (SELECT current_setting('onramp.archive_from')::timestamptz)
              AND e.received_at < (SELECT current_setting('onramp.archive_until')::timestamptz)
        ) TO STDOUT
        """

    // MARK: Files

    /// An app's folder name: itself when it is letters, digits, `.`, `_`
    /// and `-` (not starting with a dot), else percent-encoded.
    static func pathName(_ app: String) -> String {
        var name = ""
        for byte in app.utf8 {
            let plain = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                || byte == 0x5f || byte == 0x2d || (byte == 0x2e && !name.isEmpty)
            name += plain ? String(UnicodeScalar(byte)) : String(format: "%%%02X", byte)
        }
        return name.isEmpty ? "%" : name
    }

    /// A month is written to a file per app and day at once (the rows come
    /// unsorted): the soft limit of open files goes up to the hard one.
    static func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    static func makeDirectory(_ path: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw ArchiveError.io(path, EACCES)
        }
    }

    static func syncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw ArchiveError.io(path, errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw ArchiveError.io(path, errno) }
    }

    static func size(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : 0
    }
}
