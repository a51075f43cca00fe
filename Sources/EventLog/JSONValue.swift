/// A JSON document as a plain, `Sendable` value.
///
/// Decoded with `JSONDecoder` (whose parser bounds nesting depth, so hostile
/// input cannot exhaust the stack) and written back by `canonicalText`, with
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
        var out = ""
        write(into: &out)
        return out
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

    private func write(into out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d):
            if d.isFinite {
                if d == d.rounded(), abs(d) < 1e15 { out += String(Int64(d)) } else { out += "\(d)" }
            } else {
                out += "null"
            }
        case .string(let s): Self.writeString(s, into: &out)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.write(into: &out)
            }
            out += "]"
        case .object(let fields):
            out += "{"
            for (i, key) in fields.keys.sorted().enumerated() {
                if i > 0 { out += "," }
                Self.writeString(key, into: &out)
                out += ":"
                fields[key]?.write(into: &out)
            }
            out += "}"
        }
    }

    private static let hex: [Character] = Array("0123456789abcdef")

    private static func writeString(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                out += "\\u00"
                out.append(hex[Int(scalar.value >> 4)])
                out.append(hex[Int(scalar.value & 15)])
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        // Most common kinds first: every failed `try?` builds a DecodingError with
        // its coding path, and that was over half of the server's CPU. JSONDecoder
        // never converts between JSON kinds, so only Int64-before-Double matters.
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
