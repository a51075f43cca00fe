import Crypto
import LogReading
import Foundation

/// What an archived month holds, written beside its files as
/// `manifest.json` once every file has been read back: per app and UTC day
/// of receipt, the file, its messages, the SHA-256 of its text, and the
/// index of keyed hashes of the ids in it (docs/lifecycle.md).
public struct ArchiveManifest: Codable, Sendable, Equatable {
    public struct File: Codable, Sendable, Equatable {
        public var app: String
        /// The UTC day the server received its messages, YYYY-MM-DD.
        public var day: String
        /// Relative to the month's directory.
        public var path: String
        public var messages: Int
        /// SHA-256 of the uncompressed text, hex.
        public var contentSHA256: String
        /// The file listing the keyed hashes of the ids in it, relative to the month's directory.
        public var idIndex: String
        /// SHA-256 of that index file's text, hex.
        public var idIndexSHA256: String

        enum CodingKeys: String, CodingKey {
            case app, day, path, messages
            case contentSHA256 = "content_sha256"
            case idIndex = "id_index"
            case idIndexSHA256 = "id_index_sha256"
        }
    }

    public var format = 1
    /// YYYY-MM.
    public var month: String
    public var messages: Int
    public var writtenAt: String
    public var files: [File]
    /// Erasures applied to the files since they were written (request ids).
    public var erasures: [Int64] = []

    enum CodingKeys: String, CodingKey {
        case format, month, messages, files, erasures
        case writtenAt = "written_at"
    }

    public static let fileName = "manifest.json"

    /// The manifest's text as written: sorted keys, so a month's manifest
    /// reads the same whenever it is written from the same files.
    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    static func sha256(_ data: Data) -> String { GzipWriter.hex(SHA256.hash(data: data)) }

    /// Reads a month's manifest from `directory/YYYY-MM/manifest.json`.
    public static func load(directory: String, month: String) throws -> (ArchiveManifest, sha256: String) {
        let path = "\(directory)/\(month)/\(fileName)"
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ArchiveError.io(path, FileManager.default.fileExists(atPath: path) ? EACCES : ENOENT)
        }
        do {
            return (try JSONDecoder().decode(ArchiveManifest.self, from: data), sha256(data))
        } catch {
            throw ArchiveError.damaged(path, "not a manifest (\(error))")
        }
    }

    /// Writes it as `manifest.json.partial`, syncs it and renames it into
    /// place; returns the SHA-256 of its text.
    func write(directory: String) throws -> String {
        let data = try encoded()
        try MonthDirectory.writeWhole("\(directory)/\(month)/\(Self.fileName)", data)
        return Self.sha256(data)
    }

    /// Reads every file (or those of `apps`) back and checks it against the
    /// manifest: its lines and the hash of its text, and its id index.
    public func verify(directory: String, apps: Set<String>? = nil) throws {
        let base = "\(directory)/\(month)"
        // On every core: reading back a month is gunzipping and hashing it.
        _ = try Background.mapOnEveryCore(files.filter { apps?.contains($0.app) ?? true }) { file in
            let read = try GzipReader.forEachLine("\(base)/\(file.path)") { _ in }
            guard read.lines == file.messages else {
                throw ArchiveError.damaged("\(base)/\(file.path)", "\(read.lines) messages where the manifest says \(file.messages)")
            }
            guard read.contentSHA256 == file.contentSHA256 else {
                throw ArchiveError.damaged("\(base)/\(file.path)", "its SHA-256 is not the manifest's")
            }
            let indexPath = "\(base)/\(file.idIndex)"
            guard let index = FileManager.default.contents(atPath: indexPath) else { throw ArchiveError.io(indexPath, ENOENT) }
            guard Self.sha256(index) == file.idIndexSHA256 else {
                throw ArchiveError.damaged(indexPath, "its SHA-256 is not the manifest's")
            }
        }
    }
}
