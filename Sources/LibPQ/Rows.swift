public import Foundation

/// Name and type of one result column.
public struct Column: Sendable, Hashable {
    public let name: String
    public let typeOID: UInt32
}

/// The rows of one statement, copied out of the PGresult (which is freed at once),
/// so a `QueryResult` is a plain value that can cross threads.
public struct QueryResult: Sendable {
    public let columns: [Column]
    public let rows: [Row]
    /// Rows touched by INSERT/UPDATE/DELETE/COPY, from the command tag.
    public let affectedRows: Int

    /// The first row, or nil when there is none.
    public var first: Row? { rows.first }

    /// The single value of a one-row, one-column result.
    public func scalar<T: PostgresDecodable>(_ type: T.Type = T.self) throws -> T {
        guard let row = rows.first else {
            throw PostgresError(.unexpectedResult, message: "expected one row, got none")
        }
        return try row.decode(type, at: 0)
    }
}

/// One result row. Values are kept in PostgreSQL's text format and decoded on
/// demand with a type check against the column's OID.
public struct Row: Sendable {
    let columns: [Column]
    let values: [String?]

    public var count: Int { values.count }

    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, at index: Int) throws -> T {
        guard index >= 0, index < values.count else {
            throw PostgresError(.decoding, message: "column index \(index) out of range (row has \(values.count))")
        }
        return try T.decode(values[index], column: columns[index])
    }

    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, _ name: String) throws -> T {
        guard let index = columns.firstIndex(where: { $0.name == name }) else {
            let names = columns.map(\.name).joined(separator: ", ")
            throw PostgresError(.decoding, message: "no column named '\(name)' (columns: \(names))")
        }
        return try decode(type, at: index)
    }

    /// The raw text of a column, whatever its type (nil for NULL).
    public func text(at index: Int) -> String? { values[index] }
}

/// A Swift type that can be read from a text-format column.
public protocol PostgresDecodable: Sendable {
    /// Column types this type accepts; anything else is a decoding error.
    static var acceptedTypes: Set<UInt32> { get }
    static func decode(text: String) -> Self?
    static func decode(_ text: String?, column: Column) throws -> Self
}

extension PostgresDecodable {
    public static func decode(_ text: String?, column: Column) throws -> Self {
        guard acceptedTypes.contains(column.typeOID) else {
            throw PostgresError(
                .decoding,
                message: "column '\(column.name)' is \(PostgresType.name(of: column.typeOID)), cannot decode it as \(Self.self)"
            )
        }
        guard let text else {
            throw PostgresError(.decoding, message: "column '\(column.name)' is NULL, expected \(Self.self); decode as \(Self.self)? instead")
        }
        guard let value = decode(text: text) else {
            throw PostgresError(.decoding, message: "column '\(column.name)' holds a value that is not a valid \(Self.self)")
        }
        return value
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static var acceptedTypes: Set<UInt32> { Wrapped.acceptedTypes }
    public static func decode(text: String) -> Wrapped?? { Wrapped.decode(text: text).map { .some($0) } }
    public static func decode(_ text: String?, column: Column) throws -> Wrapped? {
        guard acceptedTypes.contains(column.typeOID) else {
            throw PostgresError(
                .decoding,
                message: "column '\(column.name)' is \(PostgresType.name(of: column.typeOID)), cannot decode it as \(Wrapped.self)"
            )
        }
        guard let text else { return nil }
        return try Wrapped.decode(text, column: column)
    }
}

extension String: PostgresDecodable {
    public static let acceptedTypes: Set<UInt32> = [
        PostgresType.text, PostgresType.varchar, PostgresType.bpchar, PostgresType.name,
        PostgresType.json, PostgresType.jsonb, PostgresType.uuid,
    ]
    public static func decode(text: String) -> String? { text }
}

extension Int: PostgresDecodable {
    public static let acceptedTypes: Set<UInt32> = [PostgresType.int2, PostgresType.int4, PostgresType.int8, PostgresType.oid]
    public static func decode(text: String) -> Int? { Int(text) }
}

extension Int64: PostgresDecodable {
    public static let acceptedTypes: Set<UInt32> = [PostgresType.int2, PostgresType.int4, PostgresType.int8]
    public static func decode(text: String) -> Int64? { Int64(text) }
}

extension Int32: PostgresDecodable {
    public static let acceptedTypes: Set<UInt32> = [PostgresType.int2, PostgresType.int4]
    public static func decode(text: String) -> Int32? { Int32(text) }
}

extension Double: PostgresDecodable {
    public static let acceptedTypes: Set<UInt32> = [PostgresType.float4, PostgresType.float8, PostgresType.numeric]
    public static func decode(text: String) -> Double? {
        switch text {
        case "NaN": .nan
        case "Infinity": .infinity
        case "-Infinity": -.infinity
        default: Double(text)
        }
    }
}

extension Bool: PostgresDecodable {
    public static let acceptedTypes: Set<UInt32> = [PostgresType.bool]
    public static func decode(text: String) -> Bool? { text == "t" ? true : (text == "f" ? false : nil) }
}

extension Date: PostgresDecodable {
    public static let acceptedTypes: Set<UInt32> = [PostgresType.timestamptz, PostgresType.timestamp]
    public static func decode(text: String) -> Date? { Timestamps.parse(text).map { Timestamps.date(microseconds: $0) } }
}

extension UUID: PostgresDecodable {
    public static let acceptedTypes: Set<UInt32> = [PostgresType.uuid]
    public static func decode(text: String) -> UUID? { UUID(uuidString: text) }
}

/// A `timestamptz` read exactly, as microseconds since the Unix epoch.
public struct PostgresTimestamp: PostgresDecodable, Hashable {
    public let microseconds: Int64
    public static let acceptedTypes: Set<UInt32> = [PostgresType.timestamptz, PostgresType.timestamp]
    public static func decode(text: String) -> PostgresTimestamp? { Timestamps.parse(text).map(PostgresTimestamp.init) }
    public var date: Date { Timestamps.date(microseconds: microseconds) }
}

/// A `json`/`jsonb` column, kept as text until the caller decodes it.
public struct PostgresJSON: PostgresDecodable, Hashable {
    public let text: String
    public static let acceptedTypes: Set<UInt32> = [PostgresType.json, PostgresType.jsonb]
    public static func decode(text: String) -> PostgresJSON? { PostgresJSON(text: text) }

    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(type, from: Data(text.utf8))
    }

    /// The value as Foundation objects (dictionaries, arrays, numbers, strings, NSNull).
    public func object() throws -> Any {
        try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    }
}

/// `bytea`, decoded from PostgreSQL's hex output (`\x…`).
public struct PostgresBytes: PostgresDecodable, Hashable {
    public let bytes: [UInt8]
    public static let acceptedTypes: Set<UInt32> = [PostgresType.bytea]
    /// `\x` hex, as PostgreSQL writes bytea; a whole tally (a few MB at
    /// scale) is decoded in place through a table, with no copy of the text.
    public static func decode(text: String) -> PostgresBytes? {
        var text = text
        return text.withUTF8 { u -> PostgresBytes? in
            guard u.count >= 2, u[0] == 92, u[1] == 120, u.count % 2 == 0 else { return nil }
            var valid = true
            let bytes = hexValues.withUnsafeBufferPointer { table in
                [UInt8](unsafeUninitializedCapacity: (u.count - 2) / 2) { out, count in
                    var i = 2
                    while i < u.count {
                        let hi = table[Int(u[i])], lo = table[Int(u[i + 1])]
                        guard hi | lo < 16 else {
                            valid = false
                            break
                        }
                        out[count] = hi << 4 | lo
                        count += 1
                        i += 2
                    }
                }
            }
            return valid ? PostgresBytes(bytes: bytes) : nil
        }
    }

    /// Each byte's value as a hex digit, 255 where it is none.
    private static let hexValues: [UInt8] = (0...255).map { c in
        switch c {
        case 48...57: UInt8(c - 48)
        case 97...102: UInt8(c - 87)
        case 65...70: UInt8(c - 55)
        default: 255
        }
    }
}

/// A one-dimensional array column (`text[]`, `int8[]`, `timestamptz[]`, …) as
/// the text of each element; NULL elements are nil.
public struct PostgresArrayText: PostgresDecodable, Hashable {
    public let elements: [String?]
    public static let acceptedTypes: Set<UInt32> = [1009, 1015, 1016, 1007, 1005, 1022, 1021, 1185, 1115, 1000, 2951, 3807]
    public static func decode(text: String) -> PostgresArrayText? {
        PostgresArray.parse(text).map(PostgresArrayText.init)
    }

    /// The elements as integers (NULL stays nil); nil when one is not an integer.
    public func integers() -> [Int64?]? {
        var out: [Int64?] = []
        out.reserveCapacity(elements.count)
        for element in elements {
            guard let element else {
                out.append(nil)
                continue
            }
            guard let value = Int64(element) else { return nil }
            out.append(value)
        }
        return out
    }
}

extension PostgresArray {
    /// Parses PostgreSQL's array output (`{a,"b c",NULL}`), one dimension.
    /// Over UTF-8 bytes: the nightly job parses one array per event it reads.
    static func parse(_ text: String) -> [String?]? {
        var text = text
        return text.withUTF8(parse(bytes:))
    }

    static func parse(bytes b: UnsafeBufferPointer<UInt8>) -> [String?]? {
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\"), comma = UInt8(ascii: ",")
        guard b.count >= 2, b[0] == UInt8(ascii: "{"), b[b.count - 1] == UInt8(ascii: "}") else { return nil }
        var items: [String?] = []
        var i = 1
        let end = b.count - 1
        while i < end {
            if b[i] == quote {
                i += 1
                var value: [UInt8] = []
                var run = i  // start of the bytes not yet copied
                while i < end, b[i] != quote {
                    if b[i] == backslash, i + 1 < end {
                        value.append(contentsOf: b[run..<i])
                        i += 1
                        run = i
                    }
                    i += 1
                }
                guard i < end else { return nil }
                value.append(contentsOf: b[run..<i])
                items.append(String(decoding: value, as: UTF8.self))
                i += 1
            } else {
                let start = i
                while i < end, b[i] != comma { i += 1 }
                let token = UnsafeBufferPointer(rebasing: b[start..<i])
                items.append(token.elementsEqual("NULL".utf8) ? nil : String(decoding: token, as: UTF8.self))
            }
            if i < end {
                guard b[i] == comma else { return nil }
                i += 1
            }
        }
        return items
    }
}
