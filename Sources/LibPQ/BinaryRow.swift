import CLibPQ

/// One row of a statement's result in binary format (`Connection.forEachBinaryRow`):
/// each value as PostgreSQL's send function writes it, read in place. Where
/// a text-format row makes a string of every value for the caller to parse
/// again (a `bytea` of 8 KB as 16 KB of hex, an array of integers as one
/// string per element), these are read from their bytes, and a value is
/// checked against its column's type, so a statement whose columns change
/// fails by name instead of reading another type's bytes.
///
/// The row points into the result: read it inside the call it is handed to.
public struct BinaryRow {
    private let result: OpaquePointer
    private let row: Int32
    public let count: Int

    init(result: OpaquePointer, row: Int32, count: Int) {
        self.result = result
        self.row = row
        self.count = count
    }

    /// Whether column `index` is NULL.
    public func isNull(_ index: Int) -> Bool {
        !(0..<count).contains(index) || PQgetisnull(result, row, Int32(index)) == 1
    }

    /// A `text` (or `varchar`, `name`) column; nil for NULL.
    public func text(_ index: Int) throws(PostgresError) -> String? {
        guard let bytes = try value(index, types: Self.textTypes, expected: "text") else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A `jsonb` (or `json`) column's text; nil for NULL.
    public func json(_ index: Int) throws(PostgresError) -> String? {
        guard let bytes = try value(index, types: Self.jsonTypes, expected: "json") else { return nil }
        guard PQftype(result, Int32(index)) == Self.jsonb else { return String(decoding: bytes, as: UTF8.self) }
        // jsonb's binary form: a version byte (1), then the text.
        guard bytes.first == 1 else { throw Self.malformed(name(index), "jsonb") }
        return String(decoding: bytes.dropFirst(), as: UTF8.self)
    }

    /// A `bytea` column's bytes; nil for NULL.
    public func bytes(_ index: Int) throws(PostgresError) -> [UInt8]? {
        try value(index, types: Self.byteaTypes, expected: "bytea").map(Array.init)
    }

    /// An `int2`, `int4` or `int8` column; nil for NULL.
    public func int(_ index: Int) throws(PostgresError) -> Int? {
        guard let bytes = try value(index, types: Self.integerTypes, expected: "an integer") else { return nil }
        return try Self.integer(bytes, column: self.name(index))
    }

    /// A `bool` column; nil for NULL.
    public func bool(_ index: Int) throws(PostgresError) -> Bool? {
        guard let bytes = try value(index, types: Self.boolTypes, expected: "bool") else { return nil }
        guard bytes.count == 1 else { throw Self.malformed(name(index), "bool") }
        return bytes[0] != 0
    }

    /// A `timestamptz` column as microseconds since the Unix epoch
    /// (infinities as `Int64.max` and `.min`); nil for NULL.
    public func timestamp(_ index: Int) throws(PostgresError) -> Int64? {
        guard let bytes = try value(index, types: Self.timestamptzTypes, expected: "timestamptz") else { return nil }
        guard let microseconds = Timestamps.binary(bytes) else { throw Self.malformed(name(index), "timestamptz") }
        return microseconds
    }

    /// A one-dimensional `int2[]`, `int4[]` or `int8[]` column (an empty
    /// array has no dimension); nil for NULL, and a NULL element is nil.
    public func integers(_ index: Int) throws(PostgresError) -> [Int64?]? {
        guard let bytes = try value(index, types: Self.integerArrayTypes, expected: "an integer array") else { return nil }
        var values: [Int64?] = []
        try Self.forEachElement(of: bytes, column: name(index)) { (element: UnsafeRawBufferPointer?) throws(PostgresError) in
            guard let element else { return values.append(nil) }
            values.append(Int64(try Self.integer(element, column: name(index))))
        }
        return values
    }

    /// A one-dimensional `text[]` (or `varchar[]`) column; nil for NULL, and a NULL element is nil.
    public func texts(_ index: Int) throws(PostgresError) -> [String?]? {
        guard let bytes = try value(index, types: Self.textArrayTypes, expected: "a text array") else { return nil }
        var values: [String?] = []
        try Self.forEachElement(of: bytes, column: name(index)) { (element: UnsafeRawBufferPointer?) throws(PostgresError) in
            values.append(element.map { String(decoding: $0, as: UTF8.self) })
        }
        return values
    }

    /// Each element of a one-dimensional array's binary form (nil: NULL):
    /// the number of dimensions, a has-nulls flag, the element type, then
    /// per dimension its length and lower bound, then each element,
    /// length-prefixed (-1: NULL). An empty array has no dimension.
    private static func forEachElement(
        of bytes: UnsafeRawBufferPointer, column: @autoclosure () -> String,
        _ body: (UnsafeRawBufferPointer?) throws(PostgresError) -> Void
    ) throws(PostgresError) {
        guard bytes.count >= 12 else { throw malformed(column(), "array") }
        let dimensions = int32(bytes, at: 0)
        guard dimensions == 0 || dimensions == 1 else {
            throw PostgresError(.decoding, message: "column '\(column())': expected a one-dimensional array, got \(dimensions) dimensions")
        }
        guard dimensions == 1 else { return }
        guard bytes.count >= 20, int32(bytes, at: 12) >= 0 else { throw malformed(column(), "array") }
        var offset = 20
        for _ in 0..<int32(bytes, at: 12) {
            guard offset + 4 <= bytes.count else { throw malformed(column(), "array") }
            let size = Int(int32(bytes, at: offset))
            offset += 4
            guard size >= 0 else {
                try body(nil)
                continue
            }
            guard offset + size <= bytes.count else { throw malformed(column(), "array") }
            try body(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + size]))
            offset += size
        }
    }

    /// What `read` gives of column `index`, or an error naming the column
    /// when it is NULL: for a column declared NOT NULL (`row.required(0, row.text)`).
    /// Inlinable, so that a caller's reads are specialized for their type:
    /// called generic, each would look the type's metadata up at run time.
    /// The type sets below are built once, not on every read.
    @inlinable
    public func required<Value>(_ index: Int, _ read: (Int) throws(PostgresError) -> Value?) throws(PostgresError) -> Value {
        guard let value = try read(index) else { throw PostgresError(.decoding, message: "column '\(name(index))' is NULL") }
        return value
    }

    /// The column's name, for errors.
    public func name(_ index: Int) -> String {
        guard (0..<count).contains(index), let name = PQfname(result, Int32(index)) else { return "#\(index)" }
        return String(cString: name)
    }

    /// Column `index`'s bytes, or nil for NULL, after checking that the column exists and is of one of `types`.
    private func value(_ index: Int, types: Set<UInt32>, expected: String) throws(PostgresError) -> UnsafeRawBufferPointer? {
        guard (0..<count).contains(index) else {
            throw PostgresError(.decoding, message: "column index \(index) out of range (row has \(count))")
        }
        let column = Int32(index)
        guard types.contains(PQftype(result, column)) else {
            throw PostgresError(.decoding, message: "column '\(name(index))': expected \(expected), got type \(PQftype(result, column))")
        }
        guard PQgetisnull(result, row, column) == 0, let start = PQgetvalue(result, row, column) else { return nil }
        return UnsafeRawBufferPointer(start: start, count: Int(PQgetlength(result, row, column)))
    }

    private static func integer(_ bytes: UnsafeRawBufferPointer, column: @autoclosure () -> String) throws(PostgresError) -> Int {
        switch bytes.count {
        case 2: return Int(Int16(bigEndian: bytes.loadUnaligned(as: Int16.self)))
        case 4: return Int(Int32(bigEndian: bytes.loadUnaligned(as: Int32.self)))
        case 8: return Int(Int64(bigEndian: bytes.loadUnaligned(as: Int64.self)))
        default: throw malformed(column(), "integer")
        }
    }

    private static func int32(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Int32 {
        Int32(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self))
    }

    private static func malformed(_ column: String, _ type: String) -> PostgresError {
        PostgresError(.decoding, message: "column '\(column)': malformed binary \(type)")
    }

    // Type OIDs (pg_type.dat).
    private static let bool: UInt32 = 16, bytea: UInt32 = 17, timestamptz: UInt32 = 1184, json: UInt32 = 114, jsonb: UInt32 = 3802
    // Each built once: a literal in the call built the set for every value read.
    private static let textTypes: Set<UInt32> = [25, 1043, 19]
    private static let boolTypes: Set<UInt32> = [bool], byteaTypes: Set<UInt32> = [bytea]
    private static let timestamptzTypes: Set<UInt32> = [timestamptz], jsonTypes: Set<UInt32> = [json, jsonb]
    private static let integerTypes: Set<UInt32> = [20, 21, 23]
    private static let integerArrayTypes: Set<UInt32> = [1016, 1005, 1007]
    private static let textArrayTypes: Set<UInt32> = [1009, 1015]
}
