/// 64-bit FNV-1a of a text's UTF-8: a short, stable digest for names and
/// fingerprints people compare (not for security), and the job's hash of
/// a history row's person bytes.
public enum FNV1a {
    public static func hash(_ text: String) -> UInt64 {
        hash(bytes: text.utf8)
    }

    /// Inlinable, so a caller hashing raw bytes row by row gets it specialised.
    @inlinable
    public static func hash(bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01b3
        }
        return hash
    }
}
