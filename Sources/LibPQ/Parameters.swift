internal import CLibPQ

/// Lays out bound values the way PQexecParams wants them. Every pointer handed
/// to libpq points into buffers that live only for the duration of `body`.
enum Parameters {
    static func with<R>(
        _ values: [PostgresValue],
        _ body: (
            Int32, UnsafePointer<Oid>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?,
            UnsafePointer<Int32>?
        ) throws -> R
    ) throws(PostgresError) -> R {
        guard values.count <= 65_535 else {
            throw PostgresError(.invalidParameter, message: "\(values.count) parameters; PostgreSQL takes at most 65535")
        }
        var storage: [UInt8] = []
        var offsets: [Int?] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        var types: [Oid] = []
        for (index, value) in values.enumerated() {
            types.append(value.typeOID)
            switch value {
            case .null:
                offsets.append(nil)
                lengths.append(0)
                formats.append(0)
            case .bytes(let bytes):
                offsets.append(storage.count)
                storage.append(contentsOf: bytes)
                storage.append(0)
                lengths.append(Int32(bytes.count))
                formats.append(1)
            default:
                let text = value.textRepresentation() ?? ""
                let utf8 = text.utf8
                if utf8.contains(0) {
                    throw PostgresError(
                        .invalidParameter,
                        message: "parameter $\(index + 1) contains a NUL byte (U+0000), which PostgreSQL text cannot store"
                    )
                }
                offsets.append(storage.count)
                storage.append(contentsOf: utf8)
                storage.append(0)
                lengths.append(Int32(utf8.count))
                formats.append(0)
            }
        }
        storage.append(0)
        do {
            return try storage.withUnsafeBufferPointer { buffer in
                let base = buffer.baseAddress.map { UnsafeRawPointer($0) }
                let pointers: [UnsafePointer<CChar>?] = offsets.map { offset in
                    guard let offset, let base else { return nil }
                    return (base + offset).assumingMemoryBound(to: CChar.self)
                }
                return try pointers.withUnsafeBufferPointer { p in
                    try types.withUnsafeBufferPointer { t in
                        try lengths.withUnsafeBufferPointer { l in
                            try formats.withUnsafeBufferPointer { f in
                                try body(Int32(values.count), t.baseAddress, p.baseAddress, l.baseAddress, f.baseAddress)
                            }
                        }
                    }
                }
            }
        } catch let error as PostgresError {
            throw error
        } catch {
            throw PostgresError(.unexpectedResult, message: "\(error)")
        }
    }
}
