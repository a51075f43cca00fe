public import Funnels
public import LibPQ

/// Reads what the event catalogue holds of an app (docs/tracking-health.md),
/// summed in the database: the report's instrumentation check and
/// `onramp events` read the same counts.
public enum EventCatalogRead {
    /// `app`'s labels by version and OS over the days `from`…`through`
    /// (either open), its labels per day from `recentFrom` on (none when
    /// nil), and its property paths.
    public static func counts(
        _ c: Connection, app: String, from: String? = nil, through: String? = nil, recentFrom: String? = nil
    ) throws -> EventCatalogCounts {
        var counts = EventCatalogCounts()
        let range: [PostgresValue] = [.text(app), .optional(from), .optional(through)]
        for row in try c.query(
            """
            SELECT type, event, app_version, os_name, sum(events)::int8, sum(persons)::int8, count(DISTINCT day)::int8, max(day)::text,
                   (extract(epoch FROM min(first_seen)) * 1000000)::int8, (extract(epoch FROM max(last_seen)) * 1000000)::int8
            FROM event_catalog_days
            WHERE app = $1 AND ($2::date IS NULL OR day >= $2::date) AND ($3::date IS NULL OR day <= $3::date)
            GROUP BY type, event, app_version, os_name
            ORDER BY type, event, app_version, os_name
            """, range
        ).rows {
            counts.totals.append(EventCatalogCounts.Total(
                type: try row.decode(String.self, at: 0), event: try row.decode(String.self, at: 1), version: try row.decode(String.self, at: 2),
                os: try row.decode(String.self, at: 3), events: try row.decode(Int.self, at: 4), personDays: try row.decode(Int.self, at: 5),
                days: try row.decode(Int.self, at: 6), lastDay: try row.decode(String.self, at: 7), firstSeen: try row.decode(Int64.self, at: 8),
                lastSeen: try row.decode(Int64.self, at: 9)))
        }
        if let recentFrom {
            for row in try c.query(
                """
                SELECT type, event, day::text, sum(events)::int8, sum(persons)::int8
                FROM event_catalog_days
                WHERE app = $1 AND day >= $2::date AND ($3::date IS NULL OR day <= $3::date)
                GROUP BY type, event, day
                ORDER BY type, event, day
                """, [.text(app), .text(recentFrom), .optional(through)]
            ).rows {
                counts.recentDays.append(EventCatalogCounts.Day(
                    type: try row.decode(String.self, at: 0), event: try row.decode(String.self, at: 1), day: try row.decode(String.self, at: 2),
                    events: try row.decode(Int.self, at: 3), persons: try row.decode(Int.self, at: 4)))
            }
        }
        for row in try c.query(
            """
            SELECT type, event, app_version, path, json_type, events FROM event_catalog_properties WHERE app = $1
            ORDER BY type, event, app_version, path, json_type
            """, [.text(app)]
        ).rows {
            counts.paths.append(EventCatalogCounts.Path(
                type: try row.decode(String.self, at: 0), event: try row.decode(String.self, at: 1), version: try row.decode(String.self, at: 2),
                path: try row.decode(String.self, at: 3), jsonType: try row.decode(String.self, at: 4), events: try row.decode(Int.self, at: 5)))
        }
        return counts
    }
}
