import Foundation

/// Reads lines of `COPY … TO STDOUT` text output: what `Connection.copyOut`
/// hands over, one row per call. Streaming a large result this way costs the
/// server no cursor and the client no per-row result object.
public enum CopyText {
    /// Decodes the tab-separated fields of one line (a trailing newline is
    /// ignored) into `fields`, replacing its contents; `\N` is nil.
    public static func fields(of line: UnsafeRawBufferPointer, into fields: inout [String?]) {
        fields.removeAll(keepingCapacity: true)
        var end = line.count
        if end > 0 && line[end - 1] == 10 { end -= 1 }
        var start = 0
        var escaped = false
        var index = 0
        while index <= end {
            if index == end || line[index] == 9 {
                fields.append(field(UnsafeRawBufferPointer(rebasing: line[start..<index]), escaped: escaped))
                start = index + 1
                escaped = false
            } else if line[index] == 92 {
                escaped = true
                index += 1  // the escaped byte is never a separator
            }
            index += 1
        }
    }

    /// The byte ranges of a line's tab-separated fields (a trailing newline
    /// is not part of the last), escapes left in place, into `ranges`,
    /// replacing its contents: a row split once, its fields read undecoded.
    public static func fieldRanges(of line: UnsafeRawBufferPointer, into ranges: inout [Range<Int>]) {
        ranges.removeAll(keepingCapacity: true)
        var end = line.count
        if end > 0 && line[end - 1] == 10 { end -= 1 }
        guard let base = line.baseAddress else {
            ranges.append(0..<0)
            return
        }
        var start = 0
        while start <= end, let tab = memchr(base + start, 9, end - start) {
            let index = base.distance(to: UnsafeRawPointer(tab))
            ranges.append(start..<index)
            start = index + 1
        }
        ranges.append(start..<end)
    }

    /// Whether a field's raw bytes are `\N`, COPY's NULL.
    public static func isNull(_ field: UnsafeRawBufferPointer) -> Bool {
        field.count == 2 && field[0] == 92 && field[1] == 78
    }

    /// The raw bytes of the first field (escapes left in place): enough to
    /// tell rows apart by it without decoding the line.
    public static func firstField(of line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var end = 0
        while end < line.count && line[end] != 9 && line[end] != 10 { end += 1 }
        return UnsafeRawBufferPointer(rebasing: line[0..<end])
    }

    /// Decodes one field's raw bytes, as `firstField` gives them.
    public static func field(_ bytes: UnsafeRawBufferPointer) -> String? {
        field(bytes, escaped: hasBackslash(bytes))
    }

    /// Appends `text` with COPY's escapes, byte for byte as PostgreSQL writes
    /// them in `COPY … TO`, so a value the job renders and the same value read
    /// from the server compare equal undecoded. Runs without a byte to escape
    /// are copied whole. False if the text holds a NUL byte, which no COPY
    /// field can carry.
    public static func appendEscaped(_ text: String, to bytes: inout [UInt8]) -> Bool {
        var text = text
        return text.withUTF8 { utf8 in
            var runStart = 0
            for (index, byte) in utf8.enumerated() where byte == 92 || byte < 14 {
                let escape: UInt8
                switch byte {
                case 0: return false
                case 8: escape = UInt8(ascii: "b")
                case 9: escape = UInt8(ascii: "t")
                case 10: escape = UInt8(ascii: "n")
                case 11: escape = UInt8(ascii: "v")
                case 12: escape = UInt8(ascii: "f")
                case 13: escape = UInt8(ascii: "r")
                case 92: escape = 92
                default: continue  // other control bytes travel as they are
                }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                bytes.append(contentsOf: [92, escape])
                runStart = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
            return true
        }
    }

    private static func field(_ bytes: UnsafeRawBufferPointer, escaped: Bool) -> String? {
        guard escaped else { return String(decoding: bytes, as: UTF8.self) }
        if isNull(bytes) { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        appendUnescaped(bytes, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `bytes` hold a backslash, the start of every escape: by
    /// `memchr`, as a JSON column's kilobyte is mostly read to find none.
    public static func hasBackslash(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return false }
        return memchr(base, 92, bytes.count) != nil
    }

    /// Appends a field's raw bytes (not `\N`) to `out` without COPY's escapes.
    public static func appendUnescaped(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        guard hasBackslash(bytes) else {
            out.append(contentsOf: bytes)
            return
        }
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            i += 1
            guard byte == 92, i < bytes.count else {
                out.append(byte)
                continue
            }
            let code = bytes[i]
            i += 1
            switch code {
            case UInt8(ascii: "b"): out.append(8)
            case UInt8(ascii: "f"): out.append(12)
            case UInt8(ascii: "n"): out.append(10)
            case UInt8(ascii: "r"): out.append(13)
            case UInt8(ascii: "t"): out.append(9)
            case UInt8(ascii: "v"): out.append(11)
            case UInt8(ascii: "0")...UInt8(ascii: "7"):
                // Up to three octal digits (PostgreSQL accepts them; it does not write them).
                var value = UInt32(code - 48)
                var digits = 1
                while digits < 3, i < bytes.count, (48...55).contains(bytes[i]) {
                    value = value * 8 + UInt32(bytes[i] - 48)
                    i += 1
                    digits += 1
                }
                out.append(UInt8(truncatingIfNeeded: value))
            default: out.append(code)  // \\ and any other escaped byte stand for themselves
            }
        }
    }
}
