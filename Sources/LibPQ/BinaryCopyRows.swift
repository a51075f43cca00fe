/// Rows for one `COPY … FROM STDIN (FORMAT binary)`, each value in
/// PostgreSQL's own binary form, so the server parses no text: for the
/// job's outcome rows (timestamps, arrays, numbers) a text COPY spends most
/// of its server time parsing.
/// The caller writes each row's fields in the statement's column order, with
/// the types of those columns: the server checks only lengths.
public struct BinaryCopyRows: Sendable {
    /// The stream so far: the format's header, then the rows.
    public private(set) var bytes: [UInt8]
    public private(set) var rowCount = 0

    /// Days from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
    private static let epochDays: Int64 = 10_957

    public init(capacity: Int = 0) {
        bytes = Array("PGCOPY\n".utf8) + [0xFF, 13, 10, 0] + [0, 0, 0, 0] + [0, 0, 0, 0]  // signature, flags, no extension
        bytes.reserveCapacity(capacity)
    }

    /// The stream's end marker, sent after the last row.
    static let trailer: [UInt8] = [0xFF, 0xFF]

    /// Forgets the bytes sent so far (`CopyWriter.writePart`), the header
    /// with them: what is appended next continues the same stream, so a
    /// large COPY is rendered and sent a piece at a time.
    public mutating func removeSent() {
        bytes.removeAll(keepingCapacity: true)
    }

    /// Starts a row of `fields` values.
    public mutating func startRow(fields: Int) {
        put(Int16(fields))
        rowCount += 1
    }

    public mutating func appendNull() { put(Int32(-1)) }

    /// Text; false (nothing written) if it holds a NUL byte, which no text value can carry.
    public mutating func append(text: String) -> Bool {
        appendUTF8(text, after: nil)
    }

    public mutating func append(int32 value: Int32) {
        put(Int32(4))
        put(value)
    }

    /// A `bigint`, or NULL.
    public mutating func append(int64 value: Int64?) {
        guard let value else { return appendNull() }
        put(Int32(8))
        put(value)
    }

    public mutating func append(bool value: Bool) {
        put(Int32(1))
        bytes.append(value ? 1 : 0)
    }

    /// A `double precision`, or NULL.
    public mutating func append(double value: Double?) {
        guard let value else { return appendNull() }
        put(Int32(8))
        put(value.bitPattern)
    }

    /// A `timestamptz` from microseconds since the Unix epoch, or NULL.
    public mutating func append(timestamp microseconds: Int64?) {
        guard let microseconds else { return appendNull() }
        put(Int32(8))
        put(microseconds &- Timestamps.postgresEpochMicroseconds)
    }

    /// A `date` from days since the Unix epoch.
    public mutating func append(date days: Int64) {
        put(Int32(4))
        put(Int32(truncatingIfNeeded: days - Self.epochDays))
    }

    /// A one-dimensional `bigint[]`; nil elements are NULLs.
    public mutating func append(int8Array values: [Int64?]) {
        let present = values.reduce(0) { $0 + ($1 == nil ? 0 : 1) }
        put(Int32(Self.arrayHeaderSize(count: values.count) + 4 * values.count + 8 * present))
        putArrayHeader(count: values.count, hasNulls: present < values.count, element: PostgresType.int8)
        for value in values {
            if let value {
                put(Int32(8))
                put(value)
            } else {
                put(Int32(-1))
            }
        }
    }

    /// A one-dimensional `bigint[]` without NULLs.
    public mutating func append(int8Array values: [Int64]) {
        putArray(values, element: PostgresType.int8)
    }

    /// A one-dimensional `integer[]`.
    public mutating func append(int4Array values: [Int32]) {
        putArray(values, element: PostgresType.int4)
    }

    /// A one-dimensional `text[]`; false (nothing written) if an element holds a NUL byte.
    public mutating func append(textArray values: [String]) -> Bool {
        var values = values
        guard !values.contains(where: { $0.utf8.contains(0) }) else { return false }
        let payload = values.indices.reduce(0) { total, i in total + 4 + values[i].utf8.count }
        put(Int32(Self.arrayHeaderSize(count: values.count) + payload))
        putArrayHeader(count: values.count, hasNulls: false, element: PostgresType.text)
        for i in values.indices {
            values[i].withUTF8 { utf8 in
                put(Int32(utf8.count))
                bytes.append(contentsOf: utf8)
            }
        }
        return true
    }

    /// `jsonb` from JSON text (version 1 of its binary form is the text).
    public mutating func append(jsonb text: String) -> Bool {
        appendUTF8(text, after: 1)
    }

    /// A value of `prefix` (if any) then `text`'s bytes; false (nothing
    /// written) if `text` holds a NUL byte, which no text value can carry.
    private mutating func appendUTF8(_ text: String, after prefix: UInt8?) -> Bool {
        var text = text
        return text.withUTF8 { utf8 in
            guard !utf8.contains(0) else { return false }
            put(Int32((prefix == nil ? 0 : 1) + utf8.count))
            if let prefix { bytes.append(prefix) }
            bytes.append(contentsOf: utf8)
            return true
        }
    }

    /// An empty array has no dimensions, as PostgreSQL stores '{}'.
    private static func arrayHeaderSize(count: Int) -> Int { count == 0 ? 12 : 20 }

    /// An array of integers without NULLs, `element` their type.
    private mutating func putArray<T: FixedWidthInteger>(_ values: [T], element: UInt32) {
        let width = T.bitWidth / 8
        put(Int32(Self.arrayHeaderSize(count: values.count) + (4 + width) * values.count))
        putArrayHeader(count: values.count, hasNulls: false, element: element)
        for value in values {
            put(Int32(width))
            put(value)
        }
    }

    private mutating func putArrayHeader(count: Int, hasNulls: Bool, element: UInt32) {
        put(Int32(count == 0 ? 0 : 1))  // dimensions
        put(Int32(hasNulls ? 1 : 0))
        put(element)
        guard count > 0 else { return }
        put(Int32(count))
        put(Int32(1))  // lower bound
    }

    private mutating func put<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }
}
