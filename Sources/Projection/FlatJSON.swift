/// A parser for exactly one shape: a flat JSON object whose values are all
/// strings (`{"context.os.name": "iOS"}`), the breakdown column the job writes.
/// Anything else returns nil and the caller falls back to JSONDecoder.
enum FlatJSON {
    static func parse(_ text: String) -> [String: String]? {
        var scalars = text.unicodeScalars[...]
        func skipSpace() { while let c = scalars.first, c == " " || c == "\n" || c == "\t" || c == "\r" { scalars.removeFirst() } }
        func string() -> String? {
            guard scalars.first == "\"" else { return nil }
            scalars.removeFirst()
            var out = String.UnicodeScalarView()
            while let c = scalars.first {
                scalars.removeFirst()
                if c == "\"" { return String(out) }
                if c == "\\" {
                    guard let e = scalars.first else { return nil }
                    scalars.removeFirst()
                    switch e {
                    case "\"", "\\", "/": out.append(e)
                    case "n": out.append("\n")
                    case "r": out.append("\r")
                    case "t": out.append("\t")
                    case "b": out.append("\u{08}")
                    case "f": out.append("\u{0C}")
                    default: return nil  // \u escapes: leave them to the full decoder
                    }
                } else {
                    out.append(c)
                }
            }
            return nil
        }
        skipSpace()
        guard scalars.first == "{" else { return nil }
        scalars.removeFirst()
        var result: [String: String] = [:]
        skipSpace()
        if scalars.first == "}" {
            scalars.removeFirst()
            return result
        }
        while true {
            skipSpace()
            guard let key = string() else { return nil }
            skipSpace()
            guard scalars.first == ":" else { return nil }
            scalars.removeFirst()
            skipSpace()
            guard let value = string() else { return nil }
            result[key] = value
            skipSpace()
            guard let next = scalars.first else { return nil }
            scalars.removeFirst()
            if next == "}" { break }
            guard next == "," else { return nil }
        }
        skipSpace()
        return scalars.isEmpty ? result : nil
    }
}
