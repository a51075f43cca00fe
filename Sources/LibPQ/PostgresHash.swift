/// PostgreSQL's `hashtextextended(text, 0)` computed here, bit for bit
/// (Bob Jenkins' lookup3, as the server's `hash_bytes_extended` runs it on a
/// little-endian machine, seed 0): keys the server stores and later compares
/// with its own hashes (the event catalogue's senders) can be made from what
/// the job already read, without asking the server for each.
public enum PostgresHash {
    /// `hashtextextended(text, 0)` of the text whose UTF-8 is `bytes` (a
    /// deterministic collation's: the bytes alone are hashed).
    public static func textExtended(_ bytes: [UInt8]) -> Int64 {
        bytes.withUnsafeBytes { textExtended($0) }
    }

    /// `textExtended` of bytes in place (a COPY field's, without escapes).
    public static func textExtended(_ bytes: UnsafeRawBufferPointer) -> Int64 {
        var a: UInt32 = 0x9e37_79b9 &+ UInt32(truncatingIfNeeded: bytes.count) &+ 3_923_095
        var b = a
        var c = a
        func word(_ at: Int) -> UInt32 {
            UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
        }
        var at = 0
        while bytes.count - at >= 12 {
            a &+= word(at)
            b &+= word(at + 4)
            c &+= word(at + 8)
            mix(&a, &b, &c)
            at += 12
        }
        // The last 11 bytes, little-endian; the lowest byte of `c` stays empty.
        for index in 0..<(bytes.count - at) {
            let byte = UInt32(bytes[at + index])
            switch index {
            case 0..<4: a &+= byte << UInt32(8 * index)
            case 4..<8: b &+= byte << UInt32(8 * (index - 4))
            default: c &+= byte << UInt32(8 * (index - 7))
            }
        }
        final(&a, &b, &c)
        return Int64(bitPattern: UInt64(b) << 32 | UInt64(c))
    }

    private static func rotate(_ x: UInt32, _ k: UInt32) -> UInt32 { x << k | x >> (32 - k) }

    private static func mix(_ a: inout UInt32, _ b: inout UInt32, _ c: inout UInt32) {
        a &-= c; a ^= rotate(c, 4); c &+= b
        b &-= a; b ^= rotate(a, 6); a &+= c
        c &-= b; c ^= rotate(b, 8); b &+= a
        a &-= c; a ^= rotate(c, 16); c &+= b
        b &-= a; b ^= rotate(a, 19); a &+= c
        c &-= b; c ^= rotate(b, 4); b &+= a
    }

    private static func final(_ a: inout UInt32, _ b: inout UInt32, _ c: inout UInt32) {
        c ^= b; c &-= rotate(b, 14)
        a ^= c; a &-= rotate(c, 11)
        b ^= a; b &-= rotate(a, 25)
        c ^= b; c &-= rotate(b, 16)
        a ^= c; a &-= rotate(c, 4)
        b ^= a; b &-= rotate(a, 14)
        c ^= b; c &-= rotate(b, 24)
    }
}
