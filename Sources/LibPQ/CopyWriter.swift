internal import CLibPQ

/// Rows in `COPY` text format, as bytes: every field escaped, tab-separated,
/// newline-terminated. Built apart from any connection so that rows can be
/// rendered on one thread while a COPY of earlier rows runs on another.
public struct CopyRows: Sendable {
    public private(set) var bytes: [UInt8] = []
    public private(set) var rowCount = 0
    /// Rows sent before the last `removeAll`, so errors give the row's number in the whole COPY.
    private var earlierRows = 0

    public init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    /// Appends one row; fields in the COPY statement's column order.
    public mutating func append(_ fields: [PostgresValue]) throws {
        for (i, field) in fields.enumerated() {
            if i > 0 { bytes.append(9) }  // tab
            try append(field, column: i)
        }
        bytes.append(10)  // newline
        rowCount += 1
    }

    /// Appends a row already in COPY text format (without its newline), as it is.
    public mutating func appendLine(_ line: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: line)
        bytes.append(10)  // newline
        rowCount += 1
    }

    public mutating func removeAll() {
        earlierRows += rowCount
        bytes.removeAll(keepingCapacity: true)
        rowCount = 0
    }

    private mutating func append(_ field: PostgresValue, column: Int) throws {
        switch field {
        case .null:
            bytes.append(contentsOf: [92, 78])  // \N
        case .bytes(let raw):
            bytes.append(contentsOf: [92, 92, 120])  // \\x
            let digits: [UInt8] = Array("0123456789abcdef".utf8)
            for b in raw {
                bytes.append(digits[Int(b >> 4)])
                bytes.append(digits[Int(b & 15)])
            }
        case .int(let value):
            bytes.append(contentsOf: String(value).utf8)  // a small string: no allocation
        case .bool(let value):
            bytes.append(value ? 116 : 102)  // t, f
        case .text(let text), .json(let text):
            try appendEscaped(text, column: column)
        default:
            try appendEscaped(field.textRepresentation() ?? "", column: column)
        }
    }

    private mutating func appendEscaped(_ text: String, column: Int) throws {
        guard CopyText.appendEscaped(text, to: &bytes) else {
            throw PostgresError(
                .invalidParameter, message: "COPY field \(column + 1) of row \(earlierRows + rowCount + 1) contains a NUL byte")
        }
    }
}

/// Writes rows for `COPY … FROM STDIN` (text format), sending in 256 KB
/// chunks. It exists only inside `Connection.copyIn`.
public struct CopyWriter: ~Copyable {
    private let connection: OpaquePointer
    private var buffer = CopyRows(capacity: Self.chunk + 4096)
    private static let chunk = 256 * 1024
    /// Rows written so far.
    public private(set) var rowCount = 0

    init(connection: OpaquePointer) {
        self.connection = connection
    }

    /// Appends one row; fields in the COPY statement's column order.
    public mutating func writeRow(_ fields: [PostgresValue]) throws {
        try buffer.append(fields)
        rowCount += 1
        if buffer.bytes.count >= Self.chunk { try flush() }
    }

    /// Appends a row already in COPY text format (without its newline): an
    /// archived row going back as it was written out.
    public mutating func writeLine(_ line: UnsafeRawBufferPointer) throws {
        buffer.appendLine(line)
        rowCount += 1
        if buffer.bytes.count >= Self.chunk { try flush() }
    }

    /// Sends rows rendered elsewhere.
    public mutating func write(_ rows: CopyRows) throws {
        try flush()
        try send(rows.bytes)
        rowCount += rows.rowCount
    }

    /// Sends a whole binary COPY's rows, header to trailer: the statement must
    /// say `(FORMAT binary)`, and nothing else is written in it.
    public mutating func write(_ rows: BinaryCopyRows) throws {
        try flush()
        try send(rows.bytes)
        try send(BinaryCopyRows.trailer)
        rowCount += rows.rowCount
    }

    /// Sends a binary COPY's rows so far, without its end: one piece of a
    /// COPY sent in pieces (`BinaryCopyRows.removeSent`); `endBinary` ends it.
    public mutating func writePart(_ rows: BinaryCopyRows) throws {
        try flush()
        try send(rows.bytes)
    }

    /// Ends a binary COPY sent in pieces.
    public mutating func endBinary() throws {
        try send(BinaryCopyRows.trailer)
    }

    /// Sends what is buffered.
    mutating func flush() throws(PostgresError) {
        guard !buffer.bytes.isEmpty else { return }
        try send(buffer.bytes)
        buffer.removeAll()
    }

    /// `PQputCopyData` takes a byte count, not characters.
    private func send(_ bytes: [UInt8]) throws(PostgresError) {
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + Self.chunk)
            let sent = bytes[offset..<end].withUnsafeBufferPointer { part in
                part.withMemoryRebound(to: CChar.self) { PQputCopyData(connection, $0.baseAddress, Int32($0.count)) }
            }
            guard sent == 1 else { throw Connection.connectionError(connection) }
            offset = end
        }
    }
}
