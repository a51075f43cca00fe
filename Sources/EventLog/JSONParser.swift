/// A strict RFC 8259 parser from UTF-8 bytes straight to `JSONValue`.
///
/// Request bodies are the server's hottest path, and going through `Codable`
/// (a `JSONDecoder` tree, then a `try?` per kind per value) cost over half its
/// CPU. This reads the bytes once. It is as strict as `JSONDecoder`: invalid
/// UTF-8, lone surrogates, control characters in strings, leading zeros,
/// and numbers beyond `Double` are refused; nesting is bounded so hostile
/// input cannot exhaust the stack. Stricter than `JSONDecoder` in one way: a
/// trailing comma (`[1,]`), which RFC 8259 does not allow, is refused. A
/// repeated object key keeps its first value, as `JSONDecoder` did, so the ids
/// derived from such messages did not change when this parser replaced it.
public enum JSONParser {
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// Byte offset into the input where parsing stopped.
        public var offset: Int
        public var reason: String
        public var description: String { "\(reason) at byte \(offset)" }
    }

    /// Deepest nesting of arrays and objects accepted.
    public static let maxDepth = 256

    public static func parse(_ bytes: some Sequence<UInt8>) throws(Failure) -> JSONValue {
        func attempt(_ buffer: UnsafeRawBufferPointer) -> Result<JSONValue, Failure> {
            Result { () throws(Failure) in try parse(buffer) }
        }
        let result = bytes.withContiguousStorageIfAvailable { attempt(UnsafeRawBufferPointer($0)) }
            ?? Array(bytes).withUnsafeBytes(attempt)
        return try result.get()
    }

    static func parse(_ buffer: UnsafeRawBufferPointer) throws(Failure) -> JSONValue {
        var reader = Reader(bytes: buffer)
        reader.skipWhitespace()
        let value = try reader.value(depth: 0)
        reader.skipWhitespace()
        guard reader.index == buffer.count else { throw reader.failure("unexpected text after the JSON value") }
        return value
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        func failure(_ reason: String) -> Failure { Failure(offset: index, reason: reason) }

        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func value(depth: Int) throws(Failure) -> JSONValue {
            guard let byte = peek else { throw failure("unexpected end of input") }
            switch byte {
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw failure("unexpected character")
            }
        }

        mutating func literal(_ word: StaticString) throws(Failure) {
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count else { throw failure("unexpected end of input") }
            for k in 0..<count where bytes[index + k] != word.utf8Start[k] {
                throw failure("invalid literal")
            }
            index += count
        }

        mutating func object(depth: Int) throws(Failure) -> JSONValue {
            guard depth <= JSONParser.maxDepth else { throw failure("nested deeper than \(JSONParser.maxDepth) levels") }
            index += 1
            var fields: [String: JSONValue] = [:]
            skipWhitespace()
            if peek == UInt8(ascii: "}") {
                index += 1
                return .object(fields)
            }
            while true {
                skipWhitespace()
                if peek == UInt8(ascii: "}"), !fields.isEmpty { throw failure("a trailing comma in an object") }
                guard peek == UInt8(ascii: "\"") else { throw failure("expected a string key") }
                let key = try string()
                skipWhitespace()
                guard peek == UInt8(ascii: ":") else { throw failure("expected ':' after an object key") }
                index += 1
                skipWhitespace()
                let value = try value(depth: depth)
                if fields[key] == nil { fields[key] = value }
                skipWhitespace()
                switch peek {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "}"):
                    index += 1
                    return .object(fields)
                case nil: throw failure("unexpected end of input")
                default: throw failure("expected ',' or '}' in an object")
                }
            }
        }

        mutating func array(depth: Int) throws(Failure) -> JSONValue {
            guard depth <= JSONParser.maxDepth else { throw failure("nested deeper than \(JSONParser.maxDepth) levels") }
            index += 1
            var items: [JSONValue] = []
            skipWhitespace()
            if peek == UInt8(ascii: "]") {
                index += 1
                return .array(items)
            }
            while true {
                skipWhitespace()
                if peek == UInt8(ascii: "]"), !items.isEmpty { throw failure("a trailing comma in an array") }
                items.append(try value(depth: depth))
                skipWhitespace()
                switch peek {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "]"):
                    index += 1
                    return .array(items)
                case nil: throw failure("unexpected end of input")
                default: throw failure("expected ',' or ']' in an array")
                }
            }
        }

        /// A string: the common case (no escapes) is one UTF-8 validation of the span.
        mutating func string() throws(Failure) -> String {
            index += 1
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    guard let text = String(validating: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self) else {
                        throw Failure(offset: start, reason: "a string is not valid UTF-8")
                    }
                    index += 1
                    return text
                }
                if byte == UInt8(ascii: "\\") { return try escapedString(from: start) }
                if byte < 0x20 { throw failure("a control character inside a string must be escaped") }
                index += 1
            }
            throw failure("unterminated string")
        }

        mutating func escapedString(from start: Int) throws(Failure) -> String {
            var utf8: [UInt8] = Array(bytes[start..<index])
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    guard let text = String(validating: utf8, as: UTF8.self) else {
                        throw Failure(offset: start, reason: "a string is not valid UTF-8")
                    }
                    index += 1
                    return text
                case UInt8(ascii: "\\"):
                    index += 1
                    guard let escape = peek else { throw failure("unterminated string") }
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                    case UInt8(ascii: "b"): utf8.append(0x08)
                    case UInt8(ascii: "f"): utf8.append(0x0C)
                    case UInt8(ascii: "n"): utf8.append(0x0A)
                    case UInt8(ascii: "r"): utf8.append(0x0D)
                    case UInt8(ascii: "t"): utf8.append(0x09)
                    case UInt8(ascii: "u"): utf8.append(contentsOf: try unicodeEscape())
                    default: throw failure("invalid escape in a string")
                    }
                case 0..<0x20:
                    throw failure("a control character inside a string must be escaped")
                default:
                    utf8.append(byte)
                    index += 1
                }
            }
            throw failure("unterminated string")
        }

        /// `\uXXXX` (the `\u` already read), joining a surrogate pair.
        mutating func unicodeEscape() throws(Failure) -> String.UTF8View {
            let first = try hex4()
            var scalarValue = UInt32(first)
            if (0xD800..<0xDC00).contains(first) {
                guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw failure("a high surrogate escape is not followed by a low one")
                }
                index += 2
                let second = try hex4()
                guard (0xDC00..<0xE000).contains(second) else { throw failure("a high surrogate escape is not followed by a low one") }
                scalarValue = 0x10000 + ((UInt32(first) - 0xD800) << 10) + (UInt32(second) - 0xDC00)
            } else if (0xDC00..<0xE000).contains(first) {
                throw failure("a low surrogate escape without a high one")
            }
            guard let scalar = Unicode.Scalar(scalarValue) else { throw failure("invalid unicode escape") }
            return String(Character(scalar)).utf8
        }

        mutating func hex4() throws(Failure) -> UInt16 {
            guard bytes.count - index >= 4 else { throw failure("unterminated unicode escape") }
            var value: UInt16 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw failure("invalid hex digit in a unicode escape")
                }
                value = value << 4 | UInt16(digit)
                index += 1
            }
            return value
        }

        /// RFC 8259 number grammar; integers that fit stay exact as `Int64`.
        mutating func number() throws(Failure) -> JSONValue {
            let start = index
            var isInteger = true
            if peek == UInt8(ascii: "-") { index += 1 }
            guard let first = peek, first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9") else {
                throw failure("a number needs a digit")
            }
            if first == UInt8(ascii: "0") {
                index += 1
                if let next = peek, next >= UInt8(ascii: "0"), next <= UInt8(ascii: "9") {
                    throw failure("a number cannot have a leading zero")
                }
            } else {
                skipDigits()
            }
            if peek == UInt8(ascii: ".") {
                isInteger = false
                index += 1
                guard digitsFollow() else { throw failure("a number needs digits after '.'") }
            }
            if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
                isInteger = false
                index += 1
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
                guard digitsFollow() else { throw failure("a number needs digits in its exponent") }
            }
            let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            if isInteger, let integer = Int64(text) { return .int(integer) }
            guard let double = Double(text), double.isFinite else {
                throw Failure(offset: start, reason: "a number is out of range")
            }
            return .double(double)
        }

        mutating func skipDigits() {
            while let byte = peek, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { index += 1 }
        }

        mutating func digitsFollow() -> Bool {
            let before = index
            skipDigits()
            return index > before
        }
    }
}
