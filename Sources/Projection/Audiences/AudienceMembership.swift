import Funnels
import LibPQ

/// Who is in each audience now (`audience_members`) and every entry and exit
/// since (`audience_changes`), kept from the spans (`AudienceSpanStore`) at
/// the end of every run (docs/audiences.md, "How membership is kept").
///
/// A run compares, at its clock, the members with the spans of only those
/// who can have changed: the units it evaluated again (the incremental
/// run's `touched`), and those whose span began or ended since the last
/// run's clock. An audience that is new, or whose app a pass recomputed
/// whole, is compared whole. So a run's cost follows what changed, and the
/// members equal a rebuild's at the same clock.
enum AudienceMembership {
    struct Summary: Sendable, Equatable {
        var entered = 0
        var left = 0
    }

    /// Updates the members of `audiences` at `now`: `whole` are compared
    /// whole, the others by the incremental run's `touched` temp table (when
    /// `touched`) and the spans that began or ended since the last run.
    /// `stored` is what the last run recorded of the audiences. (An erased
    /// person's rows went with the erasure: `onramp_forget_audience_unit`.)
    static func update(
        _ c: Connection, audiences: [Audience], stored: AudienceDefinitions.Stored, whole: Set<String>, touched: Bool, now: Int64
    ) throws -> Summary {
        let names = audiences.map(\.name)
        // Audiences no longer configured: their rows go (each run records the configured ones' definitions).
        let removed = Set(stored.fingerprints.keys).subtracting(names).sorted()
        if !removed.isEmpty {
            for table in ["audience_spans", "audience_members", "audience_changes", "audience_deliveries"] {
                try c.query("DELETE FROM \(table) WHERE audience = ANY($1::text[])", [.textArray(removed)])
            }
        }
        guard !audiences.isEmpty else {
            try c.query("DELETE FROM audience_runs")
            return Summary()
        }
        var previous: Int64?
        if let row = try c.query("SELECT (extract(epoch FROM synced_at) * 1000000)::int8 FROM audience_runs").rows.first {
            previous = try row.decode(Int64?.self, at: 0)
        }
        let queue = try DeliveryQueue(c, audiences: audiences, stored: stored.deliveryURLs)
        let whole = previous == nil ? Set(names) : whole.intersection(names)
        let gradual = audiences.filter { !whole.contains($0.name) }
        try c.executeScript(
            "CREATE TEMP TABLE audience_candidates (audience text, app text, person_id text) ON COMMIT DROP")
        if !whole.isEmpty {
            try c.query(
                """
                INSERT INTO audience_candidates
                SELECT audience, app, person_id FROM audience_spans WHERE audience = ANY($1::text[])
                UNION SELECT audience, app, person_id FROM audience_members WHERE audience = ANY($1::text[])
                """, [.textArray(Array(whole))])
        }
        if !gradual.isEmpty {
            if touched {
                try c.query(
                    """
                    INSERT INTO audience_candidates
                    SELECT a.audience, t.app, t.person FROM touched t JOIN unnest($1::text[], $2::text[]) AS a(audience, app) ON a.app = t.app
                    """, [.textArray(gradual.map(\.name)), .textArray(gradual.map(\.app))])
            }
            if let previous {
                try c.query(
                    """
                    INSERT INTO audience_candidates
                    SELECT audience, app, person_id FROM audience_spans
                    WHERE audience = ANY($1::text[]) AND enters_at > $2 AND enters_at <= $3
                    UNION ALL
                    SELECT audience, app, person_id FROM audience_spans
                    WHERE audience = ANY($1::text[]) AND leaves_at > $2 AND leaves_at <= $3
                    """, [.textArray(gradual.map(\.name)), .microseconds(previous), .microseconds(now)])
            }
        }
        var summary = Summary()
        for row in try c.query(
            """
            WITH c AS (SELECT DISTINCT audience, app, person_id FROM audience_candidates),
            active AS (
                SELECT s.audience, s.app, s.person_id, max(s.enters_at) AS at
                FROM c JOIN audience_spans s ON s.audience = c.audience AND s.app = c.app AND s.person_id = c.person_id
                WHERE s.enters_at <= $1 AND (s.leaves_at IS NULL OR s.leaves_at > $1)
                GROUP BY 1, 2, 3),
            current AS (
                SELECT m.audience, m.app, m.person_id
                FROM c JOIN audience_members m ON m.audience = c.audience AND m.app = c.app AND m.person_id = c.person_id),
            diff AS (
                SELECT a.audience, a.app, a.person_id, 'enter' AS change, a.at FROM active a
                WHERE NOT EXISTS (SELECT 1 FROM current m WHERE m.audience = a.audience AND m.app = a.app AND m.person_id = a.person_id)
                UNION ALL
                SELECT m.audience, m.app, m.person_id, 'leave', coalesce((
                    SELECT max(s.leaves_at) FROM audience_spans s
                    WHERE s.audience = m.audience AND s.app = m.app AND s.person_id = m.person_id AND s.leaves_at <= $1), $1)
                FROM current m
                WHERE NOT EXISTS (SELECT 1 FROM active a WHERE a.audience = m.audience AND a.app = m.app AND a.person_id = m.person_id)),
            recorded AS (
                INSERT INTO audience_changes (audience, app, person_id, change, at, recorded_at)
                SELECT audience, app, person_id, change, at, $1 FROM diff ORDER BY at, audience, app, person_id COLLATE "C"),
            removed AS (
                DELETE FROM audience_members m USING diff d
                WHERE d.change = 'leave' AND m.audience = d.audience AND m.app = d.app AND m.person_id = d.person_id),
            added AS (
                INSERT INTO audience_members (audience, app, person_id, entered_at)
                SELECT audience, app, person_id, at FROM diff WHERE change = 'enter'),
            queued AS (
                INSERT INTO audience_deliveries (audience, app, person_id, change, at, next_attempt_at)
                SELECT d.audience, d.app, d.person_id, d.change, d.at, $1 FROM diff d
                JOIN unnest($2::text[], $3::text[]::bool[], $4::text[]::bool[]) AS q(audience, enter, leave) ON q.audience = d.audience
                WHERE (d.change = 'enter' AND q.enter) OR (d.change = 'leave' AND q.leave)
                ORDER BY d.at, d.person_id COLLATE "C")
            SELECT change, count(*) FROM diff GROUP BY change
            """, [.microseconds(now)] + queue.steadyParameters
        ).rows {
            let count = try row.decode(Int.self, at: 1)
            if try row.decode(String.self, at: 0) == "enter" { summary.entered = count } else { summary.left = count }
        }
        try queue.backfill(c, now: now)
        try c.query(
            """
            INSERT INTO audience_runs (id, synced_at) VALUES (true, $1)
            ON CONFLICT (id) DO UPDATE SET synced_at = excluded.synced_at
            """, [.microseconds(now)])
        return summary
    }
}

/// Which changes of a run go to the delivery ledger (`audience_deliveries`,
/// docs/audiences.md, "Delivering"): those an audience's `deliver` asks for.
/// A delivery that is new (a new audience, or a new or changed URL) sends
/// the members first, once, as `enter` (unless `backfill: false`), and
/// drops what was pending for the URL before; a removed one sends nothing more.
struct DeliveryQueue {
    /// Delivering as before: their changes are queued as they happen.
    private var steady: [Audience] = []
    /// Delivering anew: their members are queued after the run's changes.
    private var fresh: [Audience] = []

    /// `stored`: the URL each audience delivered to at the last run.
    init(_ c: Connection, audiences: [Audience], stored: [String: String]) throws {
        for audience in audiences {
            guard let delivery = audience.delivery else { continue }
            if stored[audience.name] == delivery.url { steady.append(audience) } else { fresh.append(audience) }
        }
        let configured = Dictionary(audiences.map { ($0.name, $0.delivery?.url) }) { first, _ in first }
        let stopped = stored.filter { configured[$0.key] != .some($0.value) }.map(\.key)
        if !stopped.isEmpty {
            try c.query("DELETE FROM audience_deliveries WHERE state = 'pending' AND audience = ANY($1::text[])", [.textArray(stopped)])
        }
    }

    /// $2 to $4 of the statement queueing a run's changes: audience, whether enters go, whether leaves go.
    var steadyParameters: [PostgresValue] {
        func flags(_ change: AudienceDelivery.Change) -> PostgresValue {
            .textArray(steady.map { $0.delivery?.on.contains(change) == true ? "t" : "f" })
        }
        return [.textArray(steady.map(\.name)), flags(.enter), flags(.leave)]
    }

    /// Queues the members of the audiences delivering anew, as `enter`.
    func backfill(_ c: Connection, now: Int64) throws {
        let backfilled = fresh.filter { ($0.delivery?.backfill ?? false) && ($0.delivery?.on.contains(.enter) ?? false) }.map(\.name)
        guard !backfilled.isEmpty else { return }
        try c.query(
            """
            INSERT INTO audience_deliveries (audience, app, person_id, change, at, next_attempt_at)
            SELECT audience, app, person_id, 'enter', entered_at, $2 FROM audience_members
            WHERE audience = ANY($1::text[]) ORDER BY entered_at, person_id COLLATE "C"
            """, [.textArray(backfilled), .microseconds(now)])
    }
}
