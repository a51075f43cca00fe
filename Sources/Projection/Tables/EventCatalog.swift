import EventLog
import Funnels
import LibPQ
import LogReading

/// Keeps the event catalogue (`event_catalog_days`, `event_catalog_properties`;
/// docs/tracking-health.md): what every app sends, by label, day, app
/// version and OS, and the property paths each label carries.
///
/// Everything in it adds up, so a night adds its new events and reads
/// nothing older: counts and first and last seen by key, property paths by
/// label and version, and persons through `event_catalog_senders`, which
/// holds, per app, day and sender (a hash of the user id, else the anonymous
/// id), the keys that sender was already counted under. The catalogue
/// follows the log, not the funnels: a rebuild carries it on from the last
/// run like a night; it is counted whole when first built, when an app's
/// time zone changes, and for an app that had an erasure: in a rebuild on
/// the job's own read of each app (`EventCatalogTally`), else in SQL.
struct EventCatalog: Sendable {
    /// The run's zone per app, the rest in `fallback`: the days are cut where the funnels' are.
    let zones: [String: String]
    let fallback: String

    init(configuration: FunnelConfiguration) {
        var zones: [String: String] = [:]
        for app in configuration.apps { zones[app.name] = app.timeZone ?? configuration.reportTimeZone ?? "UTC" }
        self.zones = zones
        fallback = configuration.reportTimeZone ?? "UTC"
    }

    /// How the days are cut, as stored in `event_catalog_state`.
    var cut: String { (zones.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" } + ["*=\(fallback)"]).joined(separator: ";") }

    private static let tables = ["event_catalog_days", "event_catalog_properties", "event_catalog_senders"]

    /// The zone an app's days are cut in.
    func zone(of app: String) -> String { zones[app] ?? fallback }

    /// What a run counts whole, decided before it reads the log: everything
    /// when the catalogue was never built or its days were cut in other
    /// zones, else the apps that lost events to an erasure.
    enum Whole: Sendable, Equatable {
        case everything
        case apps(Set<String>)

        func contains(_ app: String) -> Bool {
            switch self {
            case .everything: true
            case .apps(let apps): apps.contains(app)
            }
        }
    }

    /// How much of an app counted whole a tally stored (`write`); the rest is counted in SQL (`finish`).
    enum Counted: Sendable, Equatable {
        case all
        /// The days and senders; the property paths were left to SQL.
        case withoutPaths
    }

    /// What a run counts whole, and how the tables wait for it.
    struct Counting: Sendable {
        let whole: Whole
        /// The senders' primary key, dropped while the table is filled from
        /// empty and built once at the end: a third of the rows' cost, row by row.
        fileprivate let deferredIndexes: [String]
        /// Whether the tallies' property objects gather in `catalog_shapes`, walked once by `finish`.
        fileprivate let gathersShapes: Bool
    }

    /// The tallies' distinct property objects, gathered for one walk of their paths.
    private static let shapesTable = """
        CREATE TEMP TABLE catalog_shapes (
            app text, type text, event text, app_version text, properties jsonb, n bigint, first_seen timestamptz, last_seen timestamptz
        ) ON COMMIT DROP
        """

    /// Before a run reads the log: says what it counts whole and empties
    /// those rows, so that the tallies of the job's read (`write`) and
    /// `finish` fill them.
    func begin(_ c: Connection, erased: [String]) throws -> Counting {
        let stored = try c.query("SELECT zones FROM event_catalog_state").rows.first.map { try $0.decode(String.self, at: 0) }
        if stored != cut {
            try c.executeScript("TRUNCATE " + Self.tables.joined(separator: ", "))
            try c.executeScript(Self.shapesTable)
            return Counting(
                whole: .everything, deferredIndexes: try RebuildPlan.dropIndexes(c, table: "event_catalog_senders"), gathersShapes: true)
        }
        guard !erased.isEmpty else { return Counting(whole: .apps([]), deferredIndexes: [], gathersShapes: false) }
        for table in Self.tables {
            try c.query("DELETE FROM \(table) WHERE app = ANY($1::text[])", [.textArray(erased)])
        }
        try c.executeScript(Self.shapesTable)
        return Counting(whole: .apps(Set(erased)), deferredIndexes: [], gathersShapes: true)
    }

    /// Stores the tally of an app counted whole on the job's read (on the
    /// run's session, beside the evaluation's COPYs); nil when the tally
    /// gave up and the app is left to `finish`.
    func write(_ c: Connection, _ tally: EventCatalogTally) throws -> Counted? {
        guard !tally.abandoned else { return nil }
        let labels = tally.labelsAsKeyed()
        try copy(c, try tally.dayRows(labels), "event_catalog_days (app, type, event, day, app_version, os_name, events, persons, first_seen, last_seen)")
        if tally.hasSenders {
            try c.copyIn("COPY event_catalog_senders (app, day, sender, keys) FROM STDIN (FORMAT binary)") { writer in
                try tally.sendSenders(labels, through: &writer)
            }
        }
        guard !tally.shapesLeftToSQL else { return .withoutPaths }
        try copy(c, try tally.shapeRows(), "catalog_shapes")
        return .all
    }

    private func copy(_ c: Connection, _ rows: BinaryCopyRows, _ table: String) throws {
        guard rows.rowCount > 0 else { return }
        try c.copyIn("COPY \(table) FROM STDIN (FORMAT binary)") { try $0.write(rows) }
    }

    /// After the run's passes: counts in SQL what `whole` holds that no
    /// tally stored (`counted`: the apps the job read, by what their tallies
    /// stored), adds the events of `window` (from the last run's snapshot,
    /// whatever this run's mode) of the apps not counted whole, and records
    /// how the days were cut.
    func finish(_ c: Connection, _ counting: Counting, counted: [String: Counted], window: LogWindow, layout: EventLogLayout) throws {
        let withoutPaths = counted.filter { $0.value == .withoutPaths }.map(\.key).sorted()
        // Every event of `apps` up to the window's end.
        func countWhole(_ apps: [String], _ part: Part = .whole) throws {
            guard !apps.isEmpty else { return }
            try LogWindow.upTo(window.to).bind(c)
            try add(c, where: "\(LogWindow.condition) AND e.app = ANY($1::text[])", [.textArray(apps)], part)
        }
        switch counting.whole {
        case .everything:
            let done = counted.keys.sorted()
            if layout == .distributed {
                try LogWindow.upTo(window.to).bind(c)
                try add(c, where: "\(LogWindow.condition) AND NOT e.app = ANY($1::text[])", [.textArray(done)], .whole)
            } else {
                // The log's other apps, one probe of an index each: a scan for none would read the log again.
                try countWhole(try Self.apps(c).filter { !done.contains($0) })
            }
            for definition in counting.deferredIndexes { try c.executeScript(definition) }
        case .apps(let erased):
            try countWhole(erased.filter { counted[$0] == nil }.sorted())
            // A month's messages restored from the archive (docs/lifecycle.md) come back with new transaction
            // ids, but the catalogue counted them when they were first received: they are not added again.
            // Each as "app, unit separator, YYYY-MM", matched by `= ANY`: on Citus a multi-shard statement takes no table of parameters.
            let restored = try c.query(
                "SELECT DISTINCT app || chr(31) || to_char(month, 'YYYY-MM') FROM archive_changes WHERE change = 'restored'"
            ).rows.map { try $0.decode(String.self, at: 0) }
            try window.bind(c)
            try add(
                c,
                where: """
                    \(LogWindow.condition) AND NOT e.app = ANY($1::text[])
                    AND NOT (e.app || chr(31) || to_char(e.received_at AT TIME ZONE 'UTC', 'YYYY-MM')) = ANY($2::text[])
                    """,
                [.textArray(erased.sorted()), .textArray(restored)], .window)
        }
        if counting.gathersShapes {
            try c.query(Self.addPaths(shapes: "SELECT * FROM catalog_shapes"))
            try c.executeScript("DROP TABLE catalog_shapes")
        }
        try countWhole(withoutPaths, .paths)
        try c.query(
            "INSERT INTO event_catalog_state (zones) VALUES ($1) ON CONFLICT (only_row) DO UPDATE SET zones = excluded.zones", [.text(cut)])
    }

    /// The apps the log holds, found by skipping from one to the next along the index that starts with the app.
    private static func apps(_ c: Connection) throws -> [String] {
        try c.query(
            """
            WITH RECURSIVE a(app) AS (
                SELECT min(app) FROM events
                UNION ALL
                SELECT (SELECT min(e.app) FROM events e WHERE e.app > a.app) FROM a WHERE a.app IS NOT NULL
            )
            SELECT app FROM a WHERE app IS NOT NULL
            """
        ).rows.map { try $0.decode(String.self, at: 0) }
    }

    /// What `add` counts of its events.
    private enum Part {
        /// Everything, added to what the tables hold of their apps.
        case window
        /// Everything, the tables holding nothing of their apps yet.
        case whole
        /// The property paths alone: their days and senders are stored already.
        case paths
    }

    /// Adds the events `condition` selects (over `e`, with `parameters` as
    /// `$1` on) to the catalogue.
    private func add(_ c: Connection, where condition: String, _ parameters: [PostgresValue], _ part: Part) throws {
        let sorted = zones.sorted { $0.key < $1.key }
        let zoneParameters: [PostgresValue] = [.textArray(sorted.map(\.key)), .textArray(sorted.map(\.value)), .text(fallback)]
        let first = parameters.count + 1
        // The events once, as the catalogue keys them: every later step reads this.
        try c.query(
            """
            CREATE TEMP TABLE catalog_new ON COMMIT DROP AS
            SELECT app, type, event, day, app_version, os_name, sender, "timestamp", properties,
                   hashtextextended(type || chr(31) || event || chr(31) || app_version || chr(31) || os_name, 0) AS key
            FROM (
                SELECT e.app, e.type, COALESCE(e.event, '') AS event,
                       (e."timestamp" AT TIME ZONE COALESCE(z.zone, $\(first + 2)))::date AS day,
                       COALESCE(e.context #>> '{app,version}', '') AS app_version, COALESCE(e.context #>> '{os,name}', '') AS os_name,
                       hashtextextended(COALESCE(e.user_id, e.anonymous_id), 0) AS sender, e."timestamp", e.properties
                FROM events e LEFT JOIN unnest($\(first)::text[], $\(first + 1)::text[]) AS z(app, zone) ON z.app = e.app
                WHERE \(condition)
            ) e
            """, parameters + zoneParameters)
        switch part {
        case .paths:
            break
        case .whole:
            // Nothing stored to add to: each key's senders counted at once.
            try c.query(
                """
                INSERT INTO event_catalog_days (app, type, event, day, app_version, os_name, events, persons, first_seen, last_seen)
                SELECT app, type, event, day, app_version, os_name, count(*), count(DISTINCT sender), min("timestamp"), max("timestamp")
                FROM catalog_new GROUP BY app, type, event, day, app_version, os_name
                """)
            try c.query(
                """
                INSERT INTO event_catalog_senders (app, day, sender, keys)
                SELECT app, day, sender, array_agg(DISTINCT key ORDER BY key) FROM catalog_new GROUP BY sender, day, app
                """)
        case .window:
            // Each key's events once: the days' counts and the labels the senders' counts join back to.
            try c.query(
                """
                CREATE TEMP TABLE catalog_keys ON COMMIT DROP AS
                SELECT app, type, event, day, app_version, os_name, key, count(*) AS events, min("timestamp") AS first_seen,
                       max("timestamp") AS last_seen
                FROM catalog_new GROUP BY app, type, event, day, app_version, os_name, key
                """)
            try c.query(
                """
                INSERT INTO event_catalog_days AS d (app, type, event, day, app_version, os_name, events, persons, first_seen, last_seen)
                SELECT app, type, event, day, app_version, os_name, events, 0, first_seen, last_seen FROM catalog_keys
                ON CONFLICT (app, type, event, day, app_version, os_name) DO UPDATE
                SET events = d.events + excluded.events, first_seen = least(d.first_seen, excluded.first_seen),
                    last_seen = greatest(d.last_seen, excluded.last_seen)
                """)
            // A sender counts once per key and day: under the keys it was not
            // counted under yet. Each sender of the night is gathered with its
            // keys once, and what it was counted under is looked up by its
            // key (LATERAL, kept apart by OFFSET 0), not by a scan of every
            // day's; a sender seen for the first time that day is a plain
            // insert, one seen before has its keys merged. Grouped by the
            // sender first, the sort compares 64-bit hashes, not the app's text.
            try c.query(
                """
                WITH sent AS (
                    SELECT app, day, sender, array_agg(DISTINCT key ORDER BY key) AS keys FROM catalog_new GROUP BY sender, day, app
                ), known AS (
                    SELECT n.app, n.day, n.sender, n.keys, s.keys AS counted
                    FROM sent n LEFT JOIN LATERAL (
                        SELECT keys FROM event_catalog_senders s WHERE s.app = n.app AND s.day = n.day AND s.sender = n.sender OFFSET 0
                    ) s ON true
                ), fresh AS (
                    SELECT app, day, key, count(*) AS n FROM known, unnest(keys) AS key
                    WHERE counted IS NULL OR NOT key = ANY(counted)
                    GROUP BY app, day, key
                ), counted AS (
                    UPDATE event_catalog_days d SET persons = d.persons + f.n
                    FROM (SELECT k.app, k.type, k.event, k.day, k.app_version, k.os_name, f.n
                          FROM fresh f JOIN catalog_keys k ON k.app = f.app AND k.day = f.day AND k.key = f.key OFFSET 0) f
                    WHERE d.app = f.app AND d.type = f.type AND d.event = f.event AND d.day = f.day AND d.app_version = f.app_version
                      AND d.os_name = f.os_name
                ), added AS (
                    INSERT INTO event_catalog_senders (app, day, sender, keys)
                    SELECT app, day, sender, keys FROM known WHERE counted IS NULL
                )
                UPDATE event_catalog_senders s SET keys = ARRAY(SELECT DISTINCT k FROM unnest(s.keys || n.keys) AS k ORDER BY k)
                FROM known n
                WHERE n.counted IS NOT NULL AND NOT n.keys <@ n.counted AND s.app = n.app AND s.day = n.day AND s.sender = n.sender
                """)
            try c.executeScript("DROP TABLE catalog_keys")
        }
        try c.query(Self.addPaths(shapes: """
            SELECT app, type, event, app_version, properties, count(*) AS n, min("timestamp") AS first_seen, max("timestamp") AS last_seen
            FROM catalog_new WHERE properties <> '{}'::jsonb AND jsonb_typeof(properties) = 'object'
            GROUP BY app, type, event, app_version, properties
            """))
        try c.executeScript("DROP TABLE catalog_new")
    }

    /// Adds the property paths of `shapes` (a query of app, type, event,
    /// app_version, properties, n, first_seen, last_seen: distinct objects
    /// and their events). Paths are walked once per distinct object of a
    /// label and version (most events of a step carry the same few),
    /// weighted by its events; an object listed twice is summed.
    private static func addPaths(shapes: String) -> String {
        """
        INSERT INTO event_catalog_properties AS p (app, type, event, app_version, path, json_type, events, first_seen, last_seen)
        WITH RECURSIVE shapes AS (
            \(shapes)
        ), paths AS (
            SELECT s.app, s.type, s.event, s.app_version, s.n, s.first_seen, s.last_seen, 'properties.' || j.key AS path, j.value, 1 AS depth
            FROM shapes s, jsonb_each(s.properties) AS j
            UNION ALL
            SELECT p.app, p.type, p.event, p.app_version, p.n, p.first_seen, p.last_seen, p.path || '.' || j.key, j.value, p.depth + 1
            FROM paths p, jsonb_each(p.value) AS j
            WHERE jsonb_typeof(p.value) = 'object' AND p.depth < 4
        )
        SELECT app, type, event, app_version, path, jsonb_typeof(value), sum(n), min(first_seen), max(last_seen)
        FROM paths GROUP BY 1, 2, 3, 4, 5, 6
        ON CONFLICT (app, type, event, app_version, path, json_type) DO UPDATE
        SET events = p.events + excluded.events, first_seen = least(p.first_seen, excluded.first_seen),
            last_seen = greatest(p.last_seen, excluded.last_seen)
        """
    }
}
