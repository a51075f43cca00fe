public import Foundation

/// A value bound to a statement parameter. Values travel separately from the SQL
/// text (PQexecParams), so nothing a caller passes can change a statement.
public enum PostgresValue: Sendable, Hashable {
    case null
    case text(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case timestamp(Date)
    /// Microseconds since the Unix epoch, sent as `timestamptz` without a Date round trip.
    case microseconds(Int64)
    case bytes([UInt8])
    case uuid(UUID)
    /// JSON text, bound as `jsonb`.
    case json(String)
    /// A one-dimensional text array (`text[]`).
    case textArray([String])
    /// A one-dimensional integer array (`int8[]`; as COPY text, any integer array column).
    case intArray([Int64])

    /// Type OID sent with the parameter; 0 lets the server infer it from context
    /// (which is what makes `'…'` literals work for uuid, jsonb, timestamptz columns).
    var typeOID: UInt32 {
        switch self {
        case .int: PostgresType.int8
        case .double: PostgresType.float8
        case .bool: PostgresType.bool
        case .bytes: PostgresType.bytea
        case .json: PostgresType.jsonb
        case .textArray: PostgresType.textArray
        case .intArray: PostgresType.int8Array
        case .timestamp, .microseconds: PostgresType.timestamptz
        default: 0
        }
    }

    /// The text-format rendering PostgreSQL parses; nil for NULL.
    func textRepresentation() -> String? {
        switch self {
        case .null: nil
        case .text(let s), .json(let s): s
        case .int(let i): String(i)
        case .double(let d): d.isFinite ? "\(d)" : (d.isNaN ? "NaN" : (d > 0 ? "Infinity" : "-Infinity"))
        case .bool(let b): b ? "t" : "f"
        case .timestamp(let date): Timestamps.format(microseconds: Timestamps.microseconds(date))
        case .microseconds(let us): Timestamps.format(microseconds: us)
        case .uuid(let u): u.uuidString
        case .bytes: nil
        case .textArray(let items): PostgresArray.literal(items)
        case .intArray(let items): "{" + items.map(String.init).joined(separator: ",") + "}"
        }
    }
}

extension PostgresValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .text(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(nilLiteral: ()) { self = .null }
}

extension PostgresValue {
    public static func int(_ value: Int) -> PostgresValue { .int(Int64(value)) }
    public static func intArray(_ values: [Int]) -> PostgresValue { .intArray(values.map(Int64.init)) }
    /// `.text`, or NULL when the optional is empty.
    public static func optional(_ value: String?) -> PostgresValue { value.map { .text($0) } ?? .null }
    public static func optional(_ value: Date?) -> PostgresValue { value.map { .timestamp($0) } ?? .null }
}

/// Type OIDs the layer names.
public enum PostgresType {
    public static let bool: UInt32 = 16
    public static let bytea: UInt32 = 17
    public static let name: UInt32 = 19
    public static let int8: UInt32 = 20
    public static let int2: UInt32 = 21
    public static let int4: UInt32 = 23
    public static let text: UInt32 = 25
    public static let oid: UInt32 = 26
    public static let json: UInt32 = 114
    public static let float4: UInt32 = 700
    public static let float8: UInt32 = 701
    public static let bpchar: UInt32 = 1042
    public static let varchar: UInt32 = 1043
    public static let date: UInt32 = 1082
    public static let timestamp: UInt32 = 1114
    public static let timestamptz: UInt32 = 1184
    public static let interval: UInt32 = 1186
    public static let numeric: UInt32 = 1700
    public static let uuid: UInt32 = 2950
    public static let jsonb: UInt32 = 3802
    public static let textArray: UInt32 = 1009
    public static let int8Array: UInt32 = 1016

    static func name(of type: UInt32) -> String {
        switch type {
        case bool: "bool"
        case bytea: "bytea"
        case name: "name"
        case int8: "int8"
        case int2: "int2"
        case int4: "int4"
        case text: "text"
        case Self.oid: "oid"
        case json: "json"
        case float4: "float4"
        case float8: "float8"
        case bpchar: "bpchar"
        case varchar: "varchar"
        case date: "date"
        case timestamp: "timestamp"
        case timestamptz: "timestamptz"
        case interval: "interval"
        case numeric: "numeric"
        case uuid: "uuid"
        case jsonb: "jsonb"
        case textArray: "text[]"
        case int8Array: "int8[]"
        default: "oid \(type)"
        }
    }
}

/// Array literal text for `text[]` values written in COPY's text form
/// (`CopyWriter`): every element quoted and escaped. Parameters go in the
/// binary form (`BinaryArray`).
enum PostgresArray {
    /// `{"a","b\"c"}`, built over UTF-8 bytes.
    static func literal(_ items: [String]) -> String {
        var out: [UInt8] = [UInt8(ascii: "{")]
        out.reserveCapacity(items.reduce(2) { $0 + $1.utf8.count + 3 })
        for (i, item) in items.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            for byte in item.utf8 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { out.append(UInt8(ascii: "\\")) }
                out.append(byte)
            }
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }
}
