package import LibPQ

/// COPY takes no parameters, so a COPY that needs values (the app, the JSON
/// paths it extracts) reads them from temp tables written with bound
/// parameters: the statement's text stays fixed, and each value is read once,
/// by an uncorrelated subquery.
package enum ScopeTable {
    /// The bound app, as an expression.
    package static let app = "(SELECT app FROM history_scope)"

    /// The bound path number `n` inside its root column, as an expression.
    package static func path(_ n: Int) -> String { "(SELECT path FROM history_paths WHERE n = \(n))" }

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
        if try c.query("SELECT to_regclass('pg_temp.history_scope') IS NULL").scalar(Bool.self) {
            try c.executeScript(
                """
                CREATE TEMP TABLE history_scope (app text NOT NULL) ON COMMIT DROP;
                CREATE TEMP TABLE history_paths (n integer PRIMARY KEY, path text[] NOT NULL) ON COMMIT DROP;
                """)
        }
        try c.executeScript("DELETE FROM history_scope; DELETE FROM history_paths;")
        try c.query("INSERT INTO history_scope VALUES ($1)", [.text(app)])
        for (n, path) in paths.enumerated() {
            let parts = path.split(separator: ".", maxSplits: 1).map(String.init)
            try c.query(
                "INSERT INTO history_paths VALUES ($1, $2::text[])",
                [.int(n), .textArray(parts.count == 2 ? parts[1].split(separator: ".").map(String.init) : [])])
        }
    }
}
