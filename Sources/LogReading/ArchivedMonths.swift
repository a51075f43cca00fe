public import LibPQ

/// Which months of an app the log still holds, once older ones are archived
/// (docs/lifecycle.md): what query time and the audiences say they count from.
public enum ArchivedMonths {
    /// The first day (UTC) after the app's newest archived month, as the
    /// login reads `analytics.archive_changes` (only its granted apps); nil
    /// when no month of the app is archived, or every one was restored.
    public static func logFrom(_ c: Connection, app: String) throws -> String? {
        try c.query(
            """
            SELECT (max(month) + interval '1 month')::date::text FROM (
                SELECT DISTINCT ON (month) month, change FROM analytics.archive_changes WHERE app = $1 ORDER BY month, at DESC) s
            WHERE change = 'archived'
            """, [.text(app)]
        ).rows.first.flatMap { try $0.decode(String?.self, at: 0) }
    }
}
