import Foundation
import LibPQ

/// Rows of `COPY … TO STDOUT` (text format) written byte for byte as
/// PostgreSQL's `COPY … (FORMAT csv, HEADER)` writes them: what `onramp
/// export --format csv` writes. As for JSON lines (`JSONLines`), the server
/// sends text and this process, on the other core, quotes the fields: the
/// server's CSV quoting of a month's JSON columns was the export's limit.
struct CSVLines: Sendable {
    /// The header line, its names quoted where they must be.
    let header: [UInt8]
    private let columns: Int

    /// The export's columns (`EventExport.columns`): their names make the header.
    init(columns: [EventExport.Column]) {
        var header: [UInt8] = []
        for (index, column) in columns.enumerated() {
            if index > 0 { header.append(UInt8(ascii: ",")) }
            Array(column.name.utf8).withUnsafeBytes { Self.appendField($0, to: &header) }
        }
        header.append(10)
        self.header = header
        self.columns = columns.count
    }

    /// Appends `line` (one row, without its newline) as a CSV record and a newline.
    func append(_ line: UnsafeRawBufferPointer, fields: inout [Range<Int>], scratch: inout [UInt8], to out: inout [UInt8]) throws {
        ArchiveRow.fields(line, into: &fields)
        guard fields.count == columns else {
            throw ArchiveError.refused("a row of \(fields.count) fields where the export has \(columns) columns")
        }
        for (index, range) in fields.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            let field = UnsafeRawBufferPointer(rebasing: line[range])
            if CopyText.isNull(field) { continue }  // NULL is nothing, unquoted
            if CopyText.hasBackslash(field) {
                scratch.removeAll(keepingCapacity: true)
                CopyText.appendUnescaped(field, to: &scratch)
                scratch.withUnsafeBytes { Self.appendField($0, to: &out) }
            } else {
                Self.appendField(field, to: &out)
            }
        }
        out.append(10)
    }

    /// A value as PostgreSQL's CSV output writes it: quoted when empty (an
    /// empty string, not NULL) or when it holds a comma, a quote, a newline
    /// or a carriage return, a quote then written twice.
    static func appendField(_ value: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        let quoted = value.isEmpty || value.contains { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 10 || $0 == 13 }
        guard quoted else {
            out.append(contentsOf: value)
            return
        }
        out.append(UInt8(ascii: "\""))
        var start = 0
        while let base = value.baseAddress, start < value.count, let hit = memchr(base + start, 34, value.count - start) {
            let quote = base.distance(to: UnsafeRawPointer(hit))
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: value[start...quote]))
            out.append(UInt8(ascii: "\""))
            start = quote + 1
        }
        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: value[start...]))
        out.append(UInt8(ascii: "\""))
    }
}
