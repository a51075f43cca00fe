/// A configuration mistake, located precisely enough to fix without reading
/// the parser: `funnels.yaml: funnel 'ops_employee', steps[2].where: expected
/// a mapping of path to value`. List indices are 0-based.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file (or resource) name.
    public var source: String
    /// `funnel 'x'` / `app 'y'`, when the error is inside one.
    public var context: String?
    /// Dotted field path inside that context, e.g. `steps[2].where`.
    public var field: String?
    public var message: String

    public init(source: String, context: String? = nil, field: String? = nil, message: String) {
        self.source = source
        self.context = context
        self.field = field
        self.message = message
    }

    public var description: String {
        var location = source
        if let context { location += ": \(context)" }
        if let field, !field.isEmpty {
            location += context == nil ? ": \(field)" : ", \(field)"
        }
        return "\(location): \(message)"
    }
}
