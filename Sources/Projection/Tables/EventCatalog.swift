import Funnels
import LibPQ

/// Keeps the event catalogue (`event_catalog_days`, `event_catalog_properties`;
/// docs/tracking-health.md): what every app sends, by label, day, app
/// version and OS, and the property paths each label carries.
///
/// A night's work follows the day: the days its new events fall on are
/// counted again from the events received since the earliest of them (an
/// event is stamped at most a day after it is received, and at most the
/// ingestion horizon before), and the new events' property paths are added
/// to the stored counts. A rebuild, a change of time zone, or an erasure in
/// an app (for that app) counts everything again.
struct EventCatalog {
    /// The run's zone per app, the rest in `fallback`: the days are cut where the funnels' are.
    let zones: [String: String]
    let fallback: String
    /// Apps whose links the job keeps (those with funnels): a new link moves
    /// the id's earlier events to another person, so their days are counted again.
    let linkedApps: [String]

    init(configuration: FunnelConfiguration) {
        var zones: [String: String] = [:]
        for app in configuration.apps { zones[app.name] = app.timeZone ?? configuration.reportTimeZone ?? "UTC" }
        self.zones = zones
        fallback = configuration.reportTimeZone ?? "UTC"
        linkedApps = Array(Set(configuration.funnels.map(\.app))).sorted()
    }

    /// How the days are cut, as stored in `event_catalog_state`.
    var cut: String { (zones.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" } + ["*=\(fallback)"]).joined(separator: ";") }

    private var zoneParameters: [PostgresValue] {
        let sorted = zones.sorted { $0.key < $1.key }
        return [.textArray(sorted.map(\.key)), .textArray(sorted.map(\.value)), .text(fallback)]
    }

    /// The day of `e."timestamp"` in its app's zone, given `zones` joined as `z`.
    private static let day = #"(e."timestamp" AT TIME ZONE COALESCE(z.zone, $3))::date"#
    private static let zonesJoin = "LEFT JOIN unnest($1::text[], $2::text[]) AS z(app, zone) ON z.app = e.app"

    /// What a run does, decided before its links change.
    enum Work {
        case everything
        /// The days to count again are in the temporary table `catalog_touched`.
        case days
    }

    /// Decides the run's work, and for an incremental one finds the days its
    /// new events (`checkpoint` on) fall on, and those of the earlier events
    /// of ids they link for the first time: before the run stores the links.
    func prepare(_ c: Connection, rebuild: Bool, since checkpoint: Checkpoint) throws -> Work {
        let stored = try c.query("SELECT zones FROM event_catalog_state").rows.first.map { try $0.decode(String.self, at: 0) }
        if rebuild || stored != cut { return .everything }
        try checkpoint.bind(c)
        try c.query(
            """
            CREATE TEMP TABLE catalog_touched ON COMMIT DROP AS
            WITH new AS (
                SELECT e.app, e.anonymous_id, e.user_id, e.previous_id, e."timestamp" FROM events e WHERE \(Checkpoint.newEventsCondition)
            ), moved AS (
                SELECT DISTINCT n.app, n.anonymous_id AS id FROM new n
                WHERE n.user_id IS NOT NULL AND n.anonymous_id IS NOT NULL AND n.app = ANY($4::text[])
                  AND NOT EXISTS (SELECT 1 FROM identity_links l WHERE l.app = n.app AND l.anonymous_id = n.anonymous_id)
                UNION
                SELECT DISTINCT n.app, n.previous_id FROM new n WHERE n.previous_id IS NOT NULL AND n.app = ANY($4::text[])
            ), stamps AS (
                SELECT app, "timestamp" FROM new
                UNION ALL
                SELECT o.app, o."timestamp" FROM moved m JOIN events o ON o.app = m.app AND o.anonymous_id = m.id AND o.user_id IS NULL
                UNION ALL
                SELECT o.app, o."timestamp" FROM moved m JOIN events o ON o.app = m.app AND o.user_id = m.id
            )
            SELECT DISTINCT e.app, \(Self.day) AS day FROM stamps e \(Self.zonesJoin)
            """, zoneParameters + [.textArray(linkedApps)])
        return .days
    }

    /// Counts again what `work` says, after the run stored its links; the
    /// apps in `erased` lost events to an erasure and are counted again whole.
    func update(_ c: Connection, work: Work, since checkpoint: Checkpoint, erased: [String]) throws {
        switch work {
        case .everything:
            try c.executeScript("TRUNCATE event_catalog_days, event_catalog_properties")
            try countDays(c, where: "true", [])
            try addProperties(c, where: "true", [])
        case .days:
            if !erased.isEmpty {
                try c.query("DELETE FROM event_catalog_days WHERE app = ANY($1::text[])", [.textArray(erased)])
                try c.query("DELETE FROM event_catalog_properties WHERE app = ANY($1::text[])", [.textArray(erased)])
                try c.query("DELETE FROM catalog_touched WHERE app = ANY($1::text[])", [.textArray(erased)])
                try countDays(c, where: "e.app = ANY($4::text[])", [.textArray(erased)])
                try addProperties(c, where: "e.app = ANY($1::text[])", [.textArray(erased)])
            }
            try c.query("DELETE FROM event_catalog_days d USING catalog_touched t WHERE d.app = t.app AND d.day = t.day")
            // The earliest event of a touched day was received at most a day
            // before it was stamped (docs/ingestion.md), and a zone is at most
            // 14 hours from UTC: two days before the day's date is early enough.
            let earliest = try c.query(
                "SELECT (extract(epoch FROM (min(day) - 2)::timestamp AT TIME ZONE 'UTC') * 1000000)::int8 FROM catalog_touched"
            ).scalar(Int64?.self)
            if let earliest {
                try countDays(
                    c,
                    where: "e.received_at >= $4 AND EXISTS (SELECT 1 FROM catalog_touched t WHERE t.app = e.app AND t.day = \(Self.day))",
                    [.microseconds(earliest)])
            }
            try checkpoint.bind(c)
            try addProperties(
                c, where: "\(Checkpoint.newEventsCondition) AND NOT e.app = ANY($1::text[])", [.textArray(erased)])
        }
        try c.query(
            "INSERT INTO event_catalog_state (zones) VALUES ($1) ON CONFLICT (only_row) DO UPDATE SET zones = excluded.zones", [.text(cut)])
    }

    /// Counts the days of the events `condition` selects (over `e`, `z` and
    /// `$4` on in `extra`), each label's day by app version and OS.
    private func countDays(_ c: Connection, where condition: String, _ extra: [PostgresValue]) throws {
        try c.query(
            """
            INSERT INTO event_catalog_days (app, type, event, day, app_version, os_name, events, persons, first_seen, last_seen)
            SELECT e.app, e.type, COALESCE(e.event, ''), \(Self.day), COALESCE(e.context #>> '{app,version}', ''),
                   COALESCE(e.context #>> '{os,name}', ''), count(*), count(DISTINCT COALESCE(l.person_id, e.user_id, e.anonymous_id)),
                   min(e."timestamp"), max(e."timestamp")
            FROM events e \(Self.zonesJoin)
            LEFT JOIN identity_links l ON l.app = e.app AND l.anonymous_id = COALESCE(e.user_id, e.anonymous_id)
            WHERE \(condition)
            GROUP BY 1, 2, 3, 4, 5, 6
            """, zoneParameters + extra)
    }

    /// Adds the property paths of the events `condition` selects (over `e`,
    /// `$1` on in `parameters`) to the stored counts.
    private func addProperties(_ c: Connection, where condition: String, _ parameters: [PostgresValue]) throws {
        try c.query(
            """
            INSERT INTO event_catalog_properties AS p (app, type, event, app_version, path, json_type, events, first_seen, last_seen)
            WITH RECURSIVE new AS (
                SELECT e.app, e.type, COALESCE(e.event, '') AS event, COALESCE(e.context #>> '{app,version}', '') AS app_version,
                       e."timestamp", e.properties
                FROM events e
                WHERE \(condition) AND jsonb_typeof(e.properties) = 'object'
            ), paths AS (
                SELECT n.app, n.type, n.event, n.app_version, n."timestamp", 'properties.' || j.key AS path, j.value, 1 AS depth
                FROM new n, jsonb_each(n.properties) AS j
                UNION ALL
                SELECT p.app, p.type, p.event, p.app_version, p."timestamp", p.path || '.' || j.key, j.value, p.depth + 1
                FROM paths p, jsonb_each(p.value) AS j
                WHERE jsonb_typeof(p.value) = 'object' AND p.depth < 4
            )
            SELECT app, type, event, app_version, path, jsonb_typeof(value), count(*), min("timestamp"), max("timestamp")
            FROM paths GROUP BY 1, 2, 3, 4, 5, 6
            ON CONFLICT (app, type, event, app_version, path, json_type) DO UPDATE
            SET events = p.events + excluded.events, first_seen = least(p.first_seen, excluded.first_seen),
                last_seen = greatest(p.last_seen, excluded.last_seen)
            """, parameters)
    }
}
