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

    /// The log's key, as its two stored pads: only the owner reads them.
    static func key(_ c: Connection) throws -> KeyedHash {
        guard let row = try c.query("SELECT encode(inner_pad, 'hex'), encode(outer_pad, 'hex') FROM privacy_key").rows.first else {
            throw ArchiveError.refused("the log has no privacy key (migration 020): the archive's id indexes cannot be made")
        }
        return KeyedHash(innerPad: bytes(hex: try row.decode(String.self, at: 0)), outerPad: bytes(hex: try row.decode(String.self, at: 1)))
    }

    /// Writes the index of `hashes` whole at `path`; returns the SHA-256 of its text.
    static func write(_ path: String, hashes: Set<String>) throws -> String {
        let text = Data(hashes.sorted().map { $0 + "\n" }.joined().utf8)
        try MonthDirectory.writeWhole(path, text)
        return ArchiveManifest.sha256(text)
    }

    /// The hashes an index file lists.
    static func read(_ path: String) throws -> Set<String> {
        guard let data = FileManager.default.contents(atPath: path) else { throw ArchiveError.io(path, ENOENT) }
        return Set(String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init))
    }

    static func bytes(hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex), next > index, let byte = UInt8(hex[index..<next], radix: 16) {
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}
