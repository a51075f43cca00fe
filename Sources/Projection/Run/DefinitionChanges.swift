import Foundation
import Funnels
import LibPQ

/// What a run does about the funnels' definitions: the stored rows of each
/// funnel were built from the definition in `funnel_definitions`
/// (`FunnelDefinition`), and a run whose configuration differs recomputes
/// that funnel from the whole log and removes the rows of a funnel it no
/// longer configures. docs/operations.md, "Changing the funnels".
public struct DefinitionChanges: Sendable, Equatable {
    /// A funnel the run computes from the whole log, and why.
    public struct Recompute: Sendable, Equatable {
        public var funnel: String
        public var app: String
        /// "new funnel", "window 24h → 1h", …
        public var reasons: [String]
        /// The events of its app the run reads for it.
        public var events: Int

        public var reason: String { reasons.joined(separator: "; ") }
    }

    /// In configuration order.
    public var recompute: [Recompute] = []
    /// Funnels whose rows are stored but that the configuration no longer has, by name.
    public var removed: [String] = []
    /// Funnels whose stored rows stand.
    public var unchanged: [String] = []

    public var isEmpty: Bool { recompute.isEmpty && removed.isEmpty }

    /// What a run says before it writes (and `--dry-run` instead of running).
    public func lines(conditional: Bool = false) -> [String] {
        let will = conditional ? "would" : "will"
        var lines = recompute.map { r in
            "\(r.funnel): \(r.reason): \(will) be recomputed from the whole log (\(r.events) events of app \(r.app))"
        }
        lines += removed.map { "\($0): no longer configured: its rows \(will) be removed from every funnel table" }
        return lines
    }

    /// The tables whose rows are a funnel's: its outcomes, day tables and
    /// analyses (`analyses`), targets and regressions. Names are the code's own.
    static func funnelTables(analyses: [any PersonAnalysis]) -> [String] {
        ["funnel_persons", "funnel_daily", "funnel_cohorts", "funnel_tallies", "funnel_targets", "funnel_regressions"]
            + analyses.flatMap { [$0.table] + $0.dayTables }
    }

    /// Compares `configuration` (its funnels' cohort days cut in `timeZone`'s
    /// zone) with the stored definitions on `c`.
    static func compare(
        _ c: Connection, configuration: FunnelConfiguration, timeZone: (Funnel) -> String
    ) throws -> DefinitionChanges {
        var stored: [String: String] = [:]
        for row in try c.query("SELECT funnel, definition::text FROM funnel_definitions").rows {
            stored[try row.decode(String.self, at: 0)] = try row.decode(String.self, at: 1)
        }
        // Rows stored before definitions were (or by a run that wrote none):
        // nothing says what they were built from.
        let unknown = try Set(c.query(
            "SELECT DISTINCT funnel FROM funnel_cohorts WHERE NOT funnel = ANY($1::text[])", [.textArray(Array(stored.keys))]
        ).rows.map { try $0.decode(String.self, at: 0) })
        var changes = DefinitionChanges()
        for funnel in configuration.funnels {
            let definition = FunnelDefinition(funnel, timeZone: timeZone(funnel))
            let reasons: [String]
            if let json = stored[funnel.name] {
                reasons = FunnelDefinition(json: json).map { definition.changes(since: $0) } ?? ["stored definition unreadable"]
            } else {
                reasons = [unknown.contains(funnel.name) ? "stored rows of an unrecorded definition" : "new funnel"]
            }
            if reasons.isEmpty {
                changes.unchanged.append(funnel.name)
            } else {
                changes.recompute.append(Recompute(funnel: funnel.name, app: funnel.app, reasons: reasons, events: 0))
            }
        }
        let configured = Set(configuration.funnels.map(\.name))
        changes.removed = Set(stored.keys).union(unknown).subtracting(configured).sorted()
        return changes
    }

    /// The events of the recomputed funnels' apps, counted once (the
    /// rebuild of those funnels reads them as counted), and set on `recompute`.
    mutating func countEvents(_ c: Connection) throws -> [String: Int] {
        let counts = try RebuildPlan.eventCounts(c, apps: Array(Set(recompute.map(\.app))))
        for index in recompute.indices { recompute[index].events = counts[recompute[index].app] ?? 0 }
        return counts
    }

    /// The funnels whose stored rows are stale: recomputed or removed.
    var stale: [String] { recompute.map(\.funnel) + removed }

    /// Removes every row of `funnels` from `tables`.
    static func removeRows(_ c: Connection, of funnels: [String], from tables: [String], keeping frozen: FrozenDays = .none) throws {
        guard !funnels.isEmpty else { return }
        for table in tables {
            // The two tables of what the last report found have no cohort day: the report writes them again.
            let kept = frozen.before == nil || ["funnel_targets", "funnel_regressions"].contains(table) ? "" : " AND cohort_day >= $2::date"
            try c.query(
                "DELETE FROM \(table) WHERE funnel = ANY($1::text[])\(kept)",
                [.textArray(funnels)] + (kept.isEmpty ? [] : [frozen.parameter]))
        }
    }

    /// Records, for each of `changed` that keeps frozen days, the definition
    /// those days were computed under (the stored one, before this run
    /// records the new), once: the first change is the one they predate.
    /// Forgets the funnels that keep no frozen day.
    static func recordFrozen(_ c: Connection, changed: [String], frozen: FrozenDays) throws {
        if frozen.before != nil, !changed.isEmpty {
            try c.query(
                """
                INSERT INTO funnel_frozen_definitions (funnel, frozen_before, definition)
                SELECT d.funnel, $2::date, d.definition FROM funnel_definitions d
                WHERE d.funnel = ANY($1::text[])
                  AND EXISTS (SELECT 1 FROM funnel_cohorts k WHERE k.funnel = d.funnel AND k.cohort_day < $2::date)
                ON CONFLICT (funnel) DO NOTHING
                """, [.textArray(changed), frozen.parameter])
        }
        try c.query(
            """
            DELETE FROM funnel_frozen_definitions f
            WHERE NOT EXISTS (SELECT 1 FROM funnel_cohorts k WHERE k.funnel = f.funnel AND k.cohort_day < $1::date)
            """, [frozen.parameter])
    }

    /// Records what every configured funnel's rows are now built from:
    /// `built` (the funnels computed from the whole log) at `now`, the rest
    /// as they were; drops the definitions of funnels no longer configured.
    static func record(
        _ c: Connection, configuration: FunnelConfiguration, timeZone: (Funnel) -> String, built: Set<String>, now: Int64
    ) throws {
        try c.query(
            "DELETE FROM funnel_definitions WHERE NOT funnel = ANY($1::text[]) OR funnel = ANY($2::text[])",
            [.textArray(configuration.funnels.map(\.name)), .textArray(Array(built))])
        for funnel in configuration.funnels where built.contains(funnel.name) {
            let definition = FunnelDefinition(funnel, timeZone: timeZone(funnel))
            try c.query(
                "INSERT INTO funnel_definitions (funnel, app, fingerprint, definition, built_at) VALUES ($1, $2, $3, $4::jsonb, $5)",
                [.text(funnel.name), .text(funnel.app), .text(definition.fingerprint), .text(definition.json), .microseconds(now)])
        }
    }
}
