internal import CLibPQ

/// Writes rows for `COPY … FROM STDIN` (text format), escaping every field and
/// sending in 256 KB chunks. It exists only inside `Connection.copyIn`.
public struct CopyWriter: ~Copyable {
    private let connection: OpaquePointer
    private var buffer: [UInt8] = []
    private static let chunk = 256 * 1024
    /// Rows written so far.
    public private(set) var rowCount = 0

    init(connection: OpaquePointer) {
        self.connection = connection
        buffer.reserveCapacity(Self.chunk + 4096)
    }

    /// Appends one row; fields in the COPY statement's column order.
    public mutating func writeRow(_ fields: [PostgresValue]) throws {
        for (i, field) in fields.enumerated() {
            if i > 0 { buffer.append(9) }  // tab
            try append(field, column: i)
        }
        buffer.append(10)  // newline
        rowCount += 1
        if buffer.count >= Self.chunk { try flush() }
    }

    private mutating func append(_ field: PostgresValue, column: Int) throws {
        switch field {
        case .null:
            buffer.append(contentsOf: [92, 78])  // \N
        case .bytes(let bytes):
            buffer.append(contentsOf: [92, 92, 120])  // \\x
            let digits: [UInt8] = Array("0123456789abcdef".utf8)
            for b in bytes {
                buffer.append(digits[Int(b >> 4)])
                buffer.append(digits[Int(b & 15)])
            }
        default:
            for byte in (field.textRepresentation() ?? "").utf8 {
                switch byte {
                case 0:
                    throw PostgresError(
                        .invalidParameter, message: "COPY field \(column + 1) of row \(rowCount + 1) contains a NUL byte")
                case 92: buffer.append(contentsOf: [92, 92])
                case 10: buffer.append(contentsOf: [92, 110])
                case 13: buffer.append(contentsOf: [92, 114])
                case 9: buffer.append(contentsOf: [92, 116])
                default: buffer.append(byte)
                }
            }
        }
    }

    /// Sends what is buffered. `PQputCopyData` takes a byte count, not characters.
    mutating func flush() throws(PostgresError) {
        guard !buffer.isEmpty else { return }
        let sent = buffer.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { PQputCopyData(connection, $0.baseAddress, Int32($0.count)) }
        }
        guard sent == 1 else { throw Connection.connectionError(connection) }
        buffer.removeAll(keepingCapacity: true)
    }
}
