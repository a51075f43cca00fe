/// A JSON document as a plain, `Sendable` value.
///
/// Parsed from request bodies by `JSONParser` (strict, with bounded nesting, so
/// hostile input cannot exhaust the stack) and written back by `canonicalText`, with
/// object keys sorted, so the same content always gives the same bytes: that
/// is what deterministic message ids hash.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }

    /// True when the value is JSON `null` (absent keys are `nil`, not `.null`).
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// Compact JSON with object keys in sorted order.
    public var canonicalText: String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// True when some string (key or value) holds U+0000, which PostgreSQL's
    /// `jsonb` and `text` cannot store.
    public var containsNUL: Bool {
        switch self {
        case .string(let s): s.utf8.contains(0)
        case .array(let items): items.contains { $0.containsNUL }
        case .object(let fields): fields.contains { $0.key.utf8.contains(0) || $0.value.containsNUL }
        default: false
        }
    }

    /// Where the first U+0000 is, as a path below `path` (`properties.items[2].name`;
    /// a key holding one is named with it escaped); nil when there is none.
    /// Builds only the one path.
    public func pathToNUL(_ path: String) -> String? {
        switch self {
        case .string(let s): return s.utf8.contains(0) ? path : nil
        case .array(let items):
            guard let i = items.firstIndex(where: \.containsNUL) else { return nil }
            return items[i].pathToNUL("\(path)[\(i)]")
        case .object(let fields):
            for (key, value) in fields {
                if key.utf8.contains(0) {
                    let named = Storable.text(key)
                    return path.isEmpty ? named : "\(path).\(named)"
                }
                if value.containsNUL { return value.pathToNUL(path.isEmpty ? key : "\(path).\(key)") }
            }
            return nil
        default: return nil
        }
    }

    /// Written as UTF-8 bytes: this runs for every stored event, several times.
    private func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d):
            if d.isFinite {
                if d == d.rounded(), abs(d) < 1e15 {
                    out.append(contentsOf: String(Int64(d)).utf8)
                } else {
                    out.append(contentsOf: "\(d)".utf8)
                }
            } else {
                out.append(contentsOf: "null".utf8)
            }
        case .string(let s): Self.writeString(s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let fields):
            out.append(UInt8(ascii: "{"))
            for (i, key) in fields.keys.sorted().enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                fields[key]?.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    private static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        let utf8 = s.utf8
        if !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            out.append(contentsOf: utf8)
        } else {
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case UInt8(ascii: "\n"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case UInt8(ascii: "\r"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case UInt8(ascii: "\t"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                case 0..<0x20:
                    out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 15)])
                default: out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        // Request bodies go through `JSONParser`; this path is for callers that
        // embed a JSONValue in a Codable type, and is the parser's reference in the
        // tests and the fuzzer. Most common kinds first: every failed `try?` builds
        // a DecodingError. JSONDecoder never converts between JSON kinds, so only
        // Int64-before-Double matters.
        if container.decodeNil() {
            self = .null
        } else if let s = try? container.decode(String.self) {
            self = .string(s)
        } else if let o = try? container.decode([String: JSONValue].self) {
            self = .object(o)
        } else if let a = try? container.decode([JSONValue].self) {
            self = .array(a)
        } else if let b = try? container.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? container.decode(Int64.self) {
            self = .int(i)
        } else {
            self = .double(try container.decode(Double.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let b): try container.encode(b)
        case .int(let i): try container.encode(i)
        case .double(let d): try container.encode(d)
        case .string(let s): try container.encode(s)
        case .array(let a): try container.encode(a)
        case .object(let o): try container.encode(o)
        }
    }
}

extension JSONValue {
    /// `base` with `overlay` laid over it: keys of `overlay` win, and where both
    /// hold an object the two merge recursively (batch context under message context).
    public static func merge(_ base: [String: JSONValue], under overlay: [String: JSONValue]) -> [String: JSONValue] {
        var result = base
        for (key, value) in overlay {
            if case .object(let inner) = value, case .object(let lower)? = result[key] {
                result[key] = .object(merge(lower, under: inner))
            } else {
                result[key] = value
            }
        }
        return result
    }
}
