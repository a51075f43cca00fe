internal import CLibPQ

/// Lays out bound values the way PQexecParams wants them. Every pointer handed
/// to libpq points into buffers that live only for the duration of `body`.
/// Arrays go in PostgreSQL's binary array form (`BinaryArray`), the rest as text.
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
        /// A value in binary form: what `write` appends to `storage`.
        func binary(_ write: () throws(PostgresError) -> Void) throws(PostgresError) {
            let start = storage.count
            try write()
            offsets.append(start)
            lengths.append(Int32(storage.count - start))
            formats.append(1)
        }
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
            case .textArray(let items):
                try binary { () throws(PostgresError) in try BinaryArray.append(items, parameter: index + 1, to: &storage) }
            case .intArray(let items):
                try binary { BinaryArray.append(items, to: &storage) }
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

/// A one-dimensional array as PostgreSQL's `array_recv` reads it: the
/// dimensions and the element type, then each element's length and bytes,
/// big-endian. As a text literal every element would be quoted and escaped
/// here, the literal copied twice more on its way to libpq, then scanned and
/// unescaped by the server: costly for the large key arrays of the nightly
/// run's lookups.
enum BinaryArray {
    /// Appends `items` as a `text[]`; a NUL byte, which `text` cannot hold, is refused.
    static func append(_ items: [String], parameter: Int, to storage: inout [UInt8]) throws(PostgresError) {
        storage.reserveCapacity(storage.count + items.reduce(20) { $0 + 4 + $1.utf8.count })
        header(elementType: PostgresType.text, count: items.count, to: &storage)
        for var item in items {
            int32(Int32(item.utf8.count), to: &storage)
            let nul = item.withUTF8 { bytes in
                storage.append(contentsOf: bytes)
                return bytes.contains(0)
            }
            if nul {
                throw PostgresError(
                    .invalidParameter,
                    message: "parameter $\(parameter) contains a NUL byte (U+0000), which PostgreSQL text cannot store")
            }
        }
    }

    /// Appends `items` as an `int8[]`.
    static func append(_ items: [Int64], to storage: inout [UInt8]) {
        header(elementType: PostgresType.int8, count: items.count, to: &storage)
        for item in items {
            int32(8, to: &storage)
            withUnsafeBytes(of: item.bigEndian) { storage.append(contentsOf: $0) }
        }
    }

    /// Dimensions (none for an empty array), the no-NULLs flag and the element type.
    private static func header(elementType: UInt32, count: Int, to storage: inout [UInt8]) {
        int32(count == 0 ? 0 : 1, to: &storage)
        int32(0, to: &storage)
        int32(Int32(bitPattern: elementType), to: &storage)
        guard count > 0 else { return }
        int32(Int32(count), to: &storage)
        int32(1, to: &storage)  // lower bound
    }

    private static func int32(_ value: Int32, to storage: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { storage.append(contentsOf: $0) }
    }
}
