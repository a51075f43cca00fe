/// PostgreSQL's `hashtextextended(text, 0)` computed here, bit for bit
/// (Bob Jenkins' lookup3, as the server's `hash_bytes_extended` runs it on a
/// little-endian machine, seed 0): keys the server stores and later compares
/// with its own hashes (the event catalogue's senders) can be made from what
/// the job already read, without asking the server for each.
public enum PostgresHash {
    /// `hashtextextended(text, 0)` of the text whose UTF-8 is `bytes` (a
    /// deterministic collation's: the bytes alone are hashed).
    public static func textExtended(_ bytes: some Collection<UInt8>) -> Int64 {
        var a: UInt32 = 0x9e37_79b9 &+ UInt32(truncatingIfNeeded: bytes.count) &+ 3_923_095
        var b = a
        var c = a
        var k = bytes.makeIterator()
        var remaining = bytes.count
        func word(_ k: inout some IteratorProtocol<UInt8>) -> UInt32 {
            var value: UInt32 = 0
            for shift in stride(from: 0, to: 32, by: 8) { value |= UInt32(k.next() ?? 0) << UInt32(shift) }
            return value
        }
        while remaining >= 12 {
            a &+= word(&k)
            b &+= word(&k)
            c &+= word(&k)
            mix(&a, &b, &c)
            remaining -= 12
        }
        // The last 11 bytes, little-endian; the lowest byte of `c` stays empty.
        var tail: [UInt32] = []
        while let byte = k.next() { tail.append(UInt32(byte)) }
        for (index, byte) in tail.enumerated() {
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
