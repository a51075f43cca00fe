import Crypto
import Foundation
import LibPQ

/// Per archive file, the keyed hashes (HMAC-SHA256 under the log's privacy
/// key, docs/privacy.md) of every id its messages carry — user, anonymous
/// and previous id, one namespace — sorted, one hex line each. An erasure
/// finds the files that hold a person from these alone, without reading
/// the files, and the index names nobody to whoever lacks the key.
enum IdIndex {
    /// The hash of an id of `app` as the index and the erasure journal hold it.
    static let kind = "id"

    /// Writes the index of every file of the month; returns each index's
    /// path (relative to the month's directory) and the SHA-256 of its text.
    static func write(
        _ c: Connection, base: String, files: [ArchiveManifest.File], from: Int64, until: Int64
    ) throws -> [String: String] {
        let byKey = Dictionary(files.map { ("\($0.app)\u{0}\($0.day)", $0.idIndex) }, uniquingKeysWith: { first, _ in first })
        var hashes: [String: String] = [:]
        var current: (key: String, path: String, handle: FileHandle, digest: SHA256)?
        func close() throws {
            guard let open = current else { return }
            current = nil
            try open.handle.synchronize()
            try open.handle.close()
            guard rename("\(base)/\(open.path).partial", "\(base)/\(open.path)") == 0 else { throw ArchiveError.io(open.path, errno) }
            hashes[open.path] = GzipWriter.hex(open.digest.finalize())
        }
        try c.forEachRow(
            """
            SELECT s.app, s.day, encode(onramp_hmac(k.inner_pad, k.outer_pad, s.app, $3, s.id), 'hex') AS hash
            FROM (SELECT DISTINCT e.app, to_char(e.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, i.id
                  FROM events e CROSS JOIN LATERAL unnest(ARRAY[e.user_id, e.anonymous_id, e.previous_id]) AS i(id)
                  WHERE e.received_at >= $1 AND e.received_at < $2 AND i.id IS NOT NULL) s
            CROSS JOIN privacy_key k
            ORDER BY 1, 2, 3
            """, [.microseconds(from), .microseconds(until), .text(kind)]
        ) { row in
            let key = "\(try row.decode(String.self, at: 0))\u{0}\(try row.decode(String.self, at: 1))"
            if current?.key != key {
                try close()
                guard let path = byKey[key] else { throw ArchiveError.refused("an id of a day the archive did not write") }
                let partial = "\(base)/\(path).partial"
                guard FileManager.default.createFile(atPath: partial, contents: nil, attributes: [.posixPermissions: 0o600]),
                      let handle = FileHandle(forWritingAtPath: partial) else { throw ArchiveError.io(partial, errno) }
                current = (key, path, handle, SHA256())
            }
            let line = Data((try row.decode(String.self, at: 2) + "\n").utf8)
            current?.digest.update(data: line)
            try current?.handle.write(contentsOf: line)
        }
        try close()
        // Every message carries an id, so every file has some; should one not, its index is empty.
        for path in byKey.values where hashes[path] == nil {
            guard FileManager.default.createFile(atPath: "\(base)/\(path)", contents: nil, attributes: [.posixPermissions: 0o600]) else {
                throw ArchiveError.io(path, errno)
            }
            hashes[path] = GzipWriter.hex(SHA256.hash(data: Data()))
        }
        return hashes
    }

    /// The hashes an index file lists.
    static func read(_ path: String) throws -> Set<String> {
        guard let data = FileManager.default.contents(atPath: path) else { throw ArchiveError.io(path, ENOENT) }
        return Set(String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init))
    }
}
