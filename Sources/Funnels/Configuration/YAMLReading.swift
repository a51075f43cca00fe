import Foundation
import Yams

/// Typed access to a Yams node tree that reports every mismatch as a
/// `ConfigurationError` naming the file, the funnel or app, and the field.
///
/// The configuration is read from the raw node tree rather than through
/// `Decodable` because decoding errors cannot say which funnel is wrong, and
/// because `where` values must keep their literal text (`page: 1` is `"1"`).
struct YAMLReader {
    let source: String
    var context: String?

    func error(_ field: String, _ message: String) -> ConfigurationError {
        ConfigurationError(source: source, context: context, field: field, message: message)
    }

    func within(_ context: String) -> YAMLReader {
        YAMLReader(source: source, context: context)
    }

    /// `true` for an explicit YAML null (`~`, `null`, or nothing after the colon).
    static func isNull(_ node: Node) -> Bool {
        guard case .scalar(let scalar) = node, scalar.style == .plain else { return false }
        return ["", "~", "null", "Null", "NULL"].contains(scalar.string)
    }

    /// The entries of a mapping, in file order, rejecting non-string and duplicate keys.
    func mapping(_ node: Node, _ field: String, expected: String = "expected a mapping") throws -> [(key: String, value: Node)] {
        guard case .mapping(let mapping) = node else { throw error(field, expected) }
        var seen = Set<String>()
        var entries: [(key: String, value: Node)] = []
        for (keyNode, value) in mapping {
            guard case .scalar(let key) = keyNode else {
                throw error(field, "keys must be plain strings")
            }
            guard seen.insert(key.string).inserted else {
                throw error(join(field, key.string), "duplicate key")
            }
            entries.append((key.string, value))
        }
        return entries
    }

    /// A mapping restricted to known keys, so typos such as `wher:` fail loudly.
    func object(_ node: Node, _ field: String, allowed: Set<String>) throws -> [String: Node] {
        var result: [String: Node] = [:]
        for (key, value) in try mapping(node, field) {
            guard allowed.contains(key) else {
                let known = allowed.sorted().joined(separator: ", ")
                throw error(join(field, key), "unknown field (expected one of: \(known))")
            }
            if !Self.isNull(value) { result[key] = value }
        }
        return result
    }

    func sequence(_ node: Node, _ field: String, expected: String = "expected a list") throws -> [Node] {
        guard case .sequence(let sequence) = node else { throw error(field, expected) }
        return Array(sequence)
    }

    /// Any scalar's literal text (numbers and booleans included).
    func scalar(_ node: Node, _ field: String, expected: String = "expected a single value") throws -> String {
        guard case .scalar(let scalar) = node, !Self.isNull(node) else { throw error(field, expected) }
        return scalar.string
    }

    func nonEmptyString(_ node: Node, _ field: String) throws -> String {
        let text = try scalar(node, field, expected: "expected a string")
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw error(field, "must not be empty")
        }
        return text
    }

    func bool(_ node: Node, _ field: String) throws -> Bool {
        switch try scalar(node, field, expected: "expected true or false").lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default: throw error(field, "expected true or false")
        }
    }

    func number(_ node: Node, _ field: String) throws -> Double {
        let text = try scalar(node, field, expected: "expected a number")
        guard let value = Double(text), value.isFinite else { throw error(field, "expected a number, got '\(text)'") }
        return value
    }

    func stringList(_ node: Node, _ field: String) throws -> [String] {
        try sequence(node, field, expected: "expected a list of strings").enumerated().map { index, item in
            try nonEmptyString(item, "\(field)[\(index)]")
        }
    }

    func join(_ field: String, _ key: String) -> String {
        field.isEmpty ? key : "\(field).\(key)"
    }
}
