/// 64-bit FNV-1a of a text's UTF-8: a short, stable digest for names and
/// fingerprints people compare (not for security).
public enum FNV1a {
    public static func hash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01b3
        }
        return hash
    }
}
