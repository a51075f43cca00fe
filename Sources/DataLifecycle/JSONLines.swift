import LibPQ

/// Rows of `COPY … TO STDOUT` (text format) turned into JSON objects, byte
/// for byte as PostgreSQL's `row_to_json` writes them: what `onramp export
/// --format jsonl` writes. PostgreSQL builds a row's JSON at about twice the
/// cost of its text row; here the server sends text and this process, on
/// the other core, writes the JSON (BENCHMARKS.md, `onramp-bench lifecycle`).
struct JSONLines: Sendable {
    enum Kind: Sendable { case number, boolean, json, time, text }

    /// `"name":` per column, rendered once.
    private let keys: [[UInt8]]
    private let kinds: [Kind]

    /// The export's columns (`EventExport.columns`), each written by its type.
    init(columns: [EventExport.Column]) {
        keys = columns.map { column in
            var key: [UInt8] = []
            Self.appendString(Array(column.name.utf8), to: &key)
            key.append(UInt8(ascii: ":"))
            return key
        }
        kinds = columns.map { column in
            switch column.type {
            case "bigint", "integer", "smallint", "numeric", "double precision", "real": .number
            case "boolean": .boolean
            case "json", "jsonb": .json
            case "timestamp with time zone": .time
            default: .text
            }
        }
    }

    /// Appends `line` (one row, without its newline) as a JSON object and a newline.
    func append(_ line: UnsafeRawBufferPointer, fields: inout [Range<Int>], to out: inout [UInt8]) throws {
        ArchiveRow.fields(line, into: &fields)
        guard fields.count == kinds.count else {
            throw ArchiveError.refused("a row of \(fields.count) fields where the export has \(kinds.count) columns")
        }
        out.append(UInt8(ascii: "{"))
        for (index, range) in fields.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: keys[index])
            let field = UnsafeRawBufferPointer(rebasing: line[range])
            if CopyText.isNull(field) {
                out.append(contentsOf: Self.null)
                continue
            }
            switch kinds[index] {
            case .number: out.append(contentsOf: field)
            case .boolean: out.append(contentsOf: field.first == UInt8(ascii: "t") ? Self.true : Self.false)
            case .json: CopyText.appendUnescaped(field, to: &out)
            case .time: Self.appendTime(field, to: &out)
            case .text:
                // Most ids and names need neither COPY's unescaping nor JSON's escaping: copied as they are.
                if field.allSatisfy({ $0 >= 0x20 && $0 != 92 && $0 != UInt8(ascii: "\"") }) {
                    out.append(UInt8(ascii: "\""))
                    out.append(contentsOf: field)
                    out.append(UInt8(ascii: "\""))
                } else {
                    var text: [UInt8] = []
                    CopyText.appendUnescaped(field, to: &text)
                    Self.appendString(text, to: &out)
                }
            }
        }
        out.append(UInt8(ascii: "}"))
        out.append(10)
    }

    private static let null = Array("null".utf8), `true` = Array("true".utf8), `false` = Array("false".utf8)

    /// A JSON string, escaped as PostgreSQL's `escape_json` does.
    static func appendString(_ text: [UInt8], to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [92, UInt8(ascii: "\"")])
            case 92: out.append(contentsOf: [92, 92])
            case 8: out.append(contentsOf: [92, UInt8(ascii: "b")])
            case 12: out.append(contentsOf: [92, UInt8(ascii: "f")])
            case 10: out.append(contentsOf: [92, UInt8(ascii: "n")])
            case 13: out.append(contentsOf: [92, UInt8(ascii: "r")])
            case 9: out.append(contentsOf: [92, UInt8(ascii: "t")])
            case 0..<0x20:
                out.append(contentsOf: Array("\\u00".utf8))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0f)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private static let hex = Array("0123456789abcdef".utf8)

    /// `2025-01-05 10:00:02.5+01` as `row_to_json` writes it: `"2025-01-05T10:00:02.5+01:00"`.
    static func appendTime(_ field: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        let start = out.count
        out.append(contentsOf: field)
        if let space = field.firstIndex(of: 32), space == 10 || (space > 4 && field[space - 3] == UInt8(ascii: "-")) {
            out[start + space] = UInt8(ascii: "T")
        }
        // The zone's offset, after the time: hours alone gain ":00".
        if let sign = field.lastIndex(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") }), sign > 10,
           field.count - sign == 3 {
            out.append(contentsOf: Self.wholeHours)
        }
        out.append(UInt8(ascii: "\""))
    }

    private static let wholeHours = Array(":00".utf8)
}
