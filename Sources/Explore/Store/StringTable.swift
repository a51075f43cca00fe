import Foundation

/// Strings numbered from 1 in the order first seen (0 means none), so a
/// column holds four bytes per event where the log holds the text. Appended
/// to its file as `(length, bytes)` records; the store's manifest says how
/// many bytes are valid, so a refresh cut short leaves nothing half-read.
struct StringTable: Sendable {
    private(set) var strings: [String] = []
    private var numbers: [String: UInt32] = [:]
    /// Strings added since `load`, not yet written.
    private var pending: [String] = []

    var count: Int { strings.count }

    /// The string numbered `number` (1-based); nil for 0.
    func string(_ number: UInt32) -> String? {
        number == 0 ? nil : strings[Int(number) - 1]
    }

    /// The number of `text`, numbering it when new; 0 for nil.
    mutating func number(_ text: String?) -> UInt32 {
        guard let text else { return 0 }
        if numbers.isEmpty && !strings.isEmpty { index() }
        if let number = numbers[text] { return number }
        strings.append(text)
        pending.append(text)
        let number = UInt32(strings.count)
        numbers[text] = number
        return number
    }

    private mutating func index() {
        numbers.reserveCapacity(strings.count)
        for (offset, string) in strings.enumerated() { numbers[string] = UInt32(offset + 1) }
    }

    /// Reads the first `bytes` bytes of `file` (what the manifest vouches for).
    static func load(_ file: URL, bytes: Int) throws -> StringTable {
        var table = StringTable()
        guard bytes > 0 else { return table }
        let data = try ColumnFile.read(file, bytes: bytes)
        try data.withUnsafeBytes { raw in
            var offset = 0
            while offset + 4 <= raw.count {
                let length = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
                offset += 4
                guard offset + length <= raw.count else { throw ColumnStoreError.damaged("\(file.lastPathComponent) ends inside a string") }
                table.strings.append(String(decoding: UnsafeRawBufferPointer(rebasing: raw[offset..<offset + length]), as: UTF8.self))
                offset += length
            }
        }
        return table
    }

    /// Appends the new strings to `file`, cut first to `bytes` (what the
    /// manifest vouched for); returns the file's valid length after.
    mutating func save(_ file: URL, bytes: Int) throws -> Int {
        var out: [UInt8] = []
        for string in pending {
            let utf8 = Array(string.utf8)
            withUnsafeBytes(of: UInt32(utf8.count).littleEndian) { out.append(contentsOf: $0) }
            out.append(contentsOf: utf8)
        }
        pending = []
        return try ColumnFile.append(out, to: file, after: bytes)
    }
}
