/// Reads the rows of `COPY … TO STDOUT (FORMAT binary)` as `Connection.copyOut`
/// hands them over, one data message per call: each field's bytes as
/// PostgreSQL's send functions write them, length-prefixed. Neither side
/// formats, escapes or scans text: a timestamp is eight bytes, not 26
/// characters to print and parse. `BinaryCopyRows` writes the same format.
///
/// The fields read point into the message: read them before the next one.
/// It holds no array (a field is found by walking the row's few length
/// prefixes), so a copy of it, as a closure capturing it makes one for
/// each field read, costs nothing to retain.
public struct BinaryCopyFields {
    private var message = UnsafeRawBufferPointer(start: nil, count: 0)
    /// Where the row's first field (its length) starts in the message.
    private var fieldsStart = 0
    /// Fields of the row read last.
    public private(set) var count = 0
    private var headerRead = false

    private static let signature: [UInt8] = Array("PGCOPY\n".utf8) + [0xFF, 13, 10, 0]

    public init() {}

    /// Reads the row of one message (the first also holds the format's
    /// header), checking that its fields fit; false at the stream's end
    /// marker, which holds no row.
    public mutating func read(_ message: UnsafeRawBufferPointer) throws(PostgresError) -> Bool {
        var offset = 0
        if !headerRead {
            guard message.count >= 19, message.prefix(11).elementsEqual(Self.signature) else {
                throw PostgresError(.unexpectedResult, message: "binary COPY output without its header")
            }
            offset = 19 + Int(Self.int32(message, at: 15))
            headerRead = true
        }
        guard offset + 2 <= message.count else { throw Self.truncated }
        let count = Int(Int16(bigEndian: message.loadUnaligned(fromByteOffset: offset, as: Int16.self)))
        offset += 2
        guard count >= 0 else { return false }
        fieldsStart = offset
        for _ in 0..<count {
            guard offset + 4 <= message.count else { throw Self.truncated }
            offset += 4 + max(0, Int(Self.int32(message, at: offset)))
            guard offset <= message.count else { throw Self.truncated }
        }
        self.message = message
        self.count = count
        return true
    }

    /// A field's bytes; nil for NULL.
    public func bytes(_ index: Int) -> UnsafeRawBufferPointer? {
        guard index >= 0, index < count else { return nil }
        var offset = fieldsStart
        for _ in 0..<index { offset += 4 + max(0, Int(Self.int32(message, at: offset))) }
        let length = Int(Self.int32(message, at: offset))
        guard length >= 0 else { return nil }
        return UnsafeRawBufferPointer(rebasing: message[offset + 4..<offset + 4 + length])
    }

    /// A `text` field; nil for NULL.
    public func text(_ index: Int) -> String? {
        bytes(index).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A `timestamptz` field as microseconds since the Unix epoch (infinities
    /// as `Int64.max` and `.min`, as `Timestamps.parse` reads them); nil for
    /// NULL or a field of another size.
    public func timestamp(_ index: Int) -> Int64? {
        bytes(index).flatMap(Timestamps.binary)
    }

    private static func int32(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Int32 {
        Int32(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self))
    }

    private static let truncated = PostgresError(.unexpectedResult, message: "binary COPY row cut short")
}
