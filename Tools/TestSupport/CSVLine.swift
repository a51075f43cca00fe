/// One CSV line's fields, RFC 4180 quoting undone: what the tests read the
/// CSV outputs with.
public enum CSVLine {
    public static func fields(_ line: String) -> [String] {
        var fields: [String] = [], field = "", quoted = false, previous: Character?
        for character in line {
            if quoted {
                if character == "\"" { quoted = false } else { field.append(character) }
            } else if character == "\"" {
                if previous == "\"" { field.append("\"") }
                quoted = true
            } else if character == "," {
                fields.append(field)
                field = ""
            } else {
                field.append(character)
            }
            previous = character
        }
        return fields + [field]
    }
}
