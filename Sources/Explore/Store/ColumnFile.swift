import Foundation

/// Plain files of fixed-width little-endian values, read whole: a column of
/// a million events is four or eight megabytes, read at the speed of the
/// page cache, with no parsing.
enum ColumnFile {
    static func read(_ file: URL, bytes: Int) throws -> Data {
        guard let handle = FileHandle(forReadingAtPath: file.path) else { throw ColumnStoreError.damaged("\(file.lastPathComponent) is missing") }
        defer { try? handle.close() }
        let data = try handle.read(upToCount: bytes) ?? Data()
        guard data.count == bytes else { throw ColumnStoreError.damaged("\(file.lastPathComponent) is shorter than its manifest says") }
        return data
    }

    /// `count` values of `T` from `file`, read straight into the array.
    static func values<T: FixedWidthInteger>(_ file: URL, count: Int, as: T.Type = T.self) throws -> [T] {
        guard count > 0 else { return [] }
        let descriptor = open(file.path, O_RDONLY)
        guard descriptor >= 0 else { throw ColumnStoreError.damaged("\(file.lastPathComponent) is missing") }
        defer { close(descriptor) }
        let bytes = count * MemoryLayout<T>.stride
        var done = 0
        let values = [T](unsafeUninitializedCapacity: count) { buffer, initialized in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            while done < bytes {
                let got = pread(descriptor, raw.baseAddress.map { $0 + done }, bytes - done, off_t(done))
                guard got > 0 else { break }
                done += got
            }
            initialized = done == bytes ? count : 0
        }
        guard done == bytes else { throw ColumnStoreError.damaged("\(file.lastPathComponent) is shorter than its manifest says") }
        // The files are little-endian, as the machines this runs on are.
        return 1.littleEndian == 1 ? values : values.map { T(littleEndian: $0) }
    }

    static func write<T: FixedWidthInteger>(_ values: [T], to file: URL) throws {
        let data = values.map(\.littleEndian).withUnsafeBytes { Data($0) }
        try data.write(to: file)
    }

    /// Writes `data` to `file` in one step: to a file beside it, then
    /// rename(2), so a reader sees the old contents or the new, never a part.
    static func replace(_ file: URL, with data: Data) throws {
        let temporary = file.appendingPathExtension("new")
        try data.write(to: temporary)
        guard rename(temporary.path, file.path) == 0 else { throw ColumnStoreError.unwritable(file.path) }
    }

    /// Appends `bytes` to `file` after cutting it to `length`; the new length.
    static func append(_ bytes: [UInt8], to file: URL, after length: Int) throws -> Int {
        if !FileManager.default.fileExists(atPath: file.path) {
            guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
                throw ColumnStoreError.unwritable(file.path)
            }
        }
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        try handle.truncate(atOffset: UInt64(length))
        try handle.seekToEnd()
        try handle.write(contentsOf: bytes)
        return length + bytes.count
    }
}

/// What went wrong with the explore store; a damaged store is rebuilt from the log.
enum ColumnStoreError: Error, CustomStringConvertible {
    case damaged(String)
    case unwritable(String)

    var description: String {
        switch self {
        case .damaged(let what): "explore store damaged: \(what)"
        case .unwritable(let path): "cannot write the explore store at \(path)"
        }
    }
}
