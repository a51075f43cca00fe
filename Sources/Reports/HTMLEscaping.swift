/// Escaping for text and attribute values in HTML (and inline SVG, which the
/// HTML parser reads with the same character references).
enum HTML {
    /// Escapes `& < > " '` so that a user-controlled string (funnel, step or
    /// breakdown name) can go into element content or a quoted attribute.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            // Control characters other than tab/newline are not allowed in HTML text.
            case "\u{0}"..."\u{8}", "\u{B}", "\u{C}", "\u{E}"..."\u{1F}", "\u{7F}": out += "\u{FFFD}"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }

    /// Shortens long labels for SVG text (which does not wrap); the full text
    /// goes into a `<title>` tooltip.
    static func truncate(_ text: String, to limit: Int) -> String {
        text.count <= limit ? text : String(text.prefix(max(1, limit - 1))) + "…"
    }
}
