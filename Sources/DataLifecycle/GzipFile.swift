import CZlib
import Crypto
import Foundation

/// One archive file being written: gzip (zlib's fast level), mode 0600,
/// beside its path as `.partial` until `finish` has it on disk and renames
/// it, so a killed archive never leaves a file that looks whole. Counts the
/// lines and hashes the uncompressed text as it goes, for the manifest.
final class GzipWriter {
    let path: String
    private let partial: String
    private var file: gzFile?
    private var digest = SHA256()
    private(set) var lines = 0
    private(set) var contentBytes = 0

    init(path: String) throws {
        self.path = path
        partial = path + ".partial"
        let fd = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ArchiveError.io(path, errno) }
        guard let file = gzdopen(fd, "wb1") else {
            let failure = errno
            close(fd)
            throw ArchiveError.io(path, failure)
        }
        self.file = file
    }

    /// Appends one line (without its newline, which this adds).
    func writeLine(_ bytes: UnsafeRawBufferPointer) throws {
        try write(bytes)
        var newline: UInt8 = 10
        try withUnsafeBytes(of: &newline) { try write($0) }
        lines += 1
    }

    /// Appends one line that ends in its newline already, as `COPY` sends a row.
    func writeTerminatedLine(_ bytes: UnsafeRawBufferPointer) throws {
        try write(bytes)
        lines += 1
    }

    /// The file's first line, which names the columns: not a message, not counted.
    func writeHeader(_ text: String) throws {
        try Array((text + "\n").utf8).withUnsafeBytes { try write($0) }
    }

    private func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard let base = bytes.baseAddress, bytes.count > 0, let file else { return }
        digest.update(bufferPointer: bytes)
        contentBytes += bytes.count
        guard gzwrite(file, base, UInt32(bytes.count)) == Int32(bytes.count) else { throw ArchiveError.io(path, EIO) }
    }

    /// Closes the stream, syncs the file and moves it into place; returns
    /// what the manifest says of it.
    func finish() throws -> (lines: Int, contentSHA256: String) {
        guard let file else { throw ArchiveError.io(path, EBADF) }
        self.file = nil
        guard gzclose(file) == Z_OK else { throw ArchiveError.io(path, EIO) }
        // Synced through a descriptor of its own: zlib's is closed, and one open file per stream is what bounds a month's.
        let fd = open(partial, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ArchiveError.io(path, errno) }
        guard fsync(fd) == 0, close(fd) == 0, rename(partial, path) == 0 else { throw ArchiveError.io(path, errno) }
        return (lines, Self.hex(digest.finalize()))
    }

    /// Gives up on the file: closes it and removes the partial.
    func abandon() {
        if let file { gzclose(file); self.file = nil }
        unlink(partial)
    }

    /// Lowercase hex, by table: `String(format:)` per byte was most of an archive's time.
    static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for byte in digest {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}

/// Reads an archive file back line by line, in bounded memory, hashing the
/// uncompressed text as it goes: what verification and restore read.
enum GzipReader {
    /// Calls `body` with each line (without its newline) but the header;
    /// returns the lines (the header not counted) and the SHA-256 of the
    /// whole uncompressed text. A damaged file throws.
    @discardableResult
    static func forEachLine(_ path: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> (lines: Int, contentSHA256: String) {
        var header = true
        let read = try forEachLineWithHeader(path) { line in
            if header { header = false } else { try body(line) }
        }
        return (max(0, read.lines - 1), read.contentSHA256)
    }

    private static func forEachLineWithHeader(
        _ path: String, _ line: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> (lines: Int, contentSHA256: String) {
        guard let file = gzopen(path, "rb") else { throw ArchiveError.io(path, errno == 0 ? ENOENT : errno) }
        defer { gzclose(file) }
        var digest = SHA256()
        var pending: [UInt8] = []
        var lines = 0
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 1)
        defer { chunk.deallocate() }
        while true {
            let read = gzread(file, chunk.baseAddress, UInt32(chunk.count))
            if read < 0 { throw ArchiveError.damaged(path, "not a whole gzip file") }
            if read == 0 { break }
            let bytes = UnsafeRawBufferPointer(rebasing: chunk[0..<Int(read)])
            digest.update(bufferPointer: bytes)
            var start = 0
            for index in 0..<bytes.count where bytes[index] == 10 {
                if pending.isEmpty {
                    try line(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
                } else {
                    pending.append(contentsOf: bytes[start..<index])
                    try pending.withUnsafeBytes { try line($0) }
                    pending.removeAll(keepingCapacity: true)
                }
                lines += 1
                start = index + 1
            }
            pending.append(contentsOf: bytes[start...])
        }
        var code: Int32 = Z_OK
        _ = gzerror(file, &code)
        guard code == Z_OK else { throw ArchiveError.damaged(path, "not a whole gzip file") }
        guard pending.isEmpty else { throw ArchiveError.damaged(path, "its last line has no end") }
        return (lines, GzipWriter.hex(digest.finalize()))
    }
}
