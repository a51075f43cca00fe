package import LibPQ

/// COPY takes no parameters, so a COPY that needs values (the app, the JSON
/// paths it extracts) reads them from settings of its transaction, set with
/// bound parameters (`set_config(…, true)`): the statement's text stays
/// fixed, and each value is read once, by an uncorrelated subquery. Settings,
/// not temp tables, so the same reads run in a read-only transaction and on a
/// replica (the explorer's, as `onramp_analyst`).
package enum ReadScope {
    /// The bound app, as an expression.
    package static let app = "(SELECT current_setting('onramp.scope_app'))"

    /// The bound path number `n` inside its root column, as an expression.
    package static func path(_ n: Int) -> String { "(SELECT current_setting('onramp.scope_path_\(n)')::text[])" }

    /// One output column per bound path (`, root #>> path`), in `paths`' order.
    package static func columns(_ paths: [String]) -> String {
        paths.enumerated().map { n, path in ", \(root(of: path)) #>> \(self.path(n))" }.joined()
    }

    /// The JSON column a dotted path starts in, as an expression: one of a
    /// fixed list, so configuration picks a column but never writes SQL (a
    /// per-row CASE over the root cost a seventh of a history read).
    package static func root(of path: String) -> String {
        switch path.prefix(while: { $0 != "." }) {
        case "properties": "e.properties"
        case "context": "e.context"
        case "traits": "e.traits"
        default: "NULL::jsonb"  // no such column: the path is never present
        }
    }

    /// Binds `app` and the dotted `paths` (`properties.page`) for the next statements of this transaction.
    package static func bind(_ c: Connection, app: String, paths: [String]) throws {
        try c.query("SELECT set_config('onramp.scope_app', $1, true)", [.text(app)])
        for (n, path) in paths.enumerated() {
            let parts = path.split(separator: ".", maxSplits: 1).map(String.init)
            try c.query(
                "SELECT set_config('onramp.scope_path_' || $1, $2::text[]::text, true)",
                [.text(String(n)), .textArray(parts.count == 2 ? parts[1].split(separator: ".").map(String.init) : [])])
        }
    }
}
