import Funnels
import LibPQ

/// What each audience's rows were built from (`audience_definitions`): an
/// audience that is new or whose definition changed is computed again from
/// the whole log, as an edited funnel is (docs/audiences.md). Its spans are
/// written by the pass that evaluates its app's funnels, so the job
/// recomputes every funnel of its app with it; a funnel recomputed in an app
/// with audiences takes the app's other funnels along, for the same reason.
enum AudienceDefinitions {
    /// What `audience_definitions` holds, by audience: read once a run, before the run records anew.
    struct Stored: Sendable {
        var fingerprints: [String: String] = [:]
        /// Of the audiences that deliver.
        var deliveryURLs: [String: String] = [:]

        static func load(_ c: Connection) throws -> Stored {
            var stored = Stored()
            for row in try c.query("SELECT audience, fingerprint, delivery_url FROM audience_definitions").rows {
                let audience = try row.decode(String.self, at: 0)
                stored.fingerprints[audience] = try row.decode(String.self, at: 1)
                stored.deliveryURLs[audience] = try row.decode(String?.self, at: 2)
            }
            return stored
        }

        /// The configured audiences whose stored definition differs (or is missing), with why.
        func changed(_ audiences: [Audience]) -> [(audience: Audience, reason: String)] {
            audiences.compactMap { audience in
                guard let fingerprint = fingerprints[audience.name] else { return (audience, "new audience '\(audience.name)'") }
                return fingerprint == AudienceDefinition.fingerprint(of: audience) ? nil : (audience, "audience '\(audience.name)' changed")
            }
        }
    }

    /// Adds to `changes.recompute` every funnel of the apps whose audiences
    /// must be computed again: those of `changed` audiences, and those with
    /// audiences and a funnel recomputed already.
    static func widen(_ changes: inout DefinitionChanges, configuration: FunnelConfiguration, changed: [(audience: Audience, reason: String)]) {
        var reasons: [String: [String]] = [:]
        for (audience, reason) in changed { reasons[audience.app, default: []].append(reason) }
        for recompute in changes.recompute where !configuration.audiences(forApp: recompute.app).isEmpty {
            reasons[recompute.app, default: []].append("funnel '\(recompute.funnel)' of its app is recomputed, and the app's audiences with it")
        }
        guard !reasons.isEmpty else { return }
        let recomputed = Set(changes.recompute.map(\.funnel))
        for funnel in configuration.funnels where !recomputed.contains(funnel.name) {
            guard let why = reasons[funnel.app] else { continue }
            changes.recompute.append(.init(funnel: funnel.name, app: funnel.app, reasons: why, events: 0))
        }
        changes.unchanged.removeAll { name in changes.recompute.contains { $0.funnel == name } }
        // In configuration order, as the rest.
        let order = Dictionary(configuration.funnels.enumerated().map { ($1.name, $0) }) { first, _ in first }
        changes.recompute.sort { (order[$0.funnel] ?? 0) < (order[$1.funnel] ?? 0) }
    }

    /// Records what the configured audiences' rows are now built from (an
    /// unchanged one keeps when it was built); forgets the others.
    static func record(_ c: Connection, configuration: FunnelConfiguration, now: Int64) throws {
        let audiences = configuration.audiences
        try c.query("DELETE FROM audience_definitions WHERE NOT audience = ANY($1::text[])", [.textArray(audiences.map(\.name))])
        guard !audiences.isEmpty else { return }
        let zones = audiences.map { audience in
            configuration.app(named: audience.app)?.timeZone ?? configuration.reportTimeZone ?? "UTC"
        }
        try c.query(
            """
            INSERT INTO audience_definitions AS d (audience, app, unit, definition, fingerprint, time_zone, delivery_url, built_at)
            SELECT a, p, u, d, f, z, nullif(url, ''), $8 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
                AS t(a, p, u, d, f, z, url)
            ON CONFLICT (audience) DO UPDATE SET
                app = excluded.app, unit = excluded.unit, definition = excluded.definition, time_zone = excluded.time_zone,
                delivery_url = excluded.delivery_url,
                built_at = CASE WHEN d.fingerprint = excluded.fingerprint THEN d.built_at ELSE excluded.built_at END,
                fingerprint = excluded.fingerprint
            """,
            [.textArray(audiences.map(\.name)), .textArray(audiences.map(\.app)), .textArray(audiences.map(\.aggregateBy.rawValue)),
             .textArray(audiences.map(AudienceDefinition.text(of:))), .textArray(audiences.map(AudienceDefinition.fingerprint(of:))),
             .textArray(zones), .textArray(audiences.map { $0.delivery?.url ?? "" }), .microseconds(now)])
    }
}
