public import Foundation
public import Funnels
public import LibPQ

/// Writes events straight into the log (for the job's and the analysts' tests) (as ingestion would, ledger included),
/// so the job's tests control every field.
public struct SeedEvent: Sendable {
    public var app: String
    public var type: String = "track"
    public var messageId: String = UUID().uuidString
    public var event: String?
    public var anonymousId: String?
    public var userId: String?
    /// An alias's previousId.
    public var previousId: String?
    /// A group call's groupId.
    public var groupId: String?
    public var timestamp: Int64
    public var properties: String = "{}"
    public var context: String = #"{"os": {"name": "iOS"}, "app": {"version": "2.3.0"}}"#
    /// When the server received it; nil: when it is inserted.
    public var receivedAt: Int64?

    public init(
        app: String, type: String = "track", messageId: String = UUID().uuidString, event: String? = nil,
        anonymousId: String? = nil, userId: String? = nil, timestamp: Int64, properties: String = "{}",
        context: String = #"{"os": {"name": "iOS"}, "app": {"version": "2.3.0"}}"#, previousId: String? = nil,
        groupId: String? = nil, receivedAt: Int64? = nil
    ) {
        self.receivedAt = receivedAt
        self.previousId = previousId
        self.groupId = groupId
        self.app = app
        self.type = type
        self.messageId = messageId
        self.event = event
        self.anonymousId = anonymousId
        self.userId = userId
        self.timestamp = timestamp
        self.properties = properties
        self.context = context
    }
}

public enum EventSeeder {
    public static func insert(_ c: Connection, _ events: [SeedEvent]) throws {
        try c.transaction { c in
            try c.copyIn(
                """
                COPY events (app, type, message_id, event, anonymous_id, user_id, "timestamp", original_timestamp,
                             received_at, properties, context, previous_id, group_id) FROM STDIN
                """
            ) { writer in
                for e in events {
                    try writer.writeRow([
                        .text(e.app), .text(e.type), .text(e.messageId), .optional(e.event), .optional(e.anonymousId),
                        .optional(e.userId), .microseconds(e.timestamp), .microseconds(e.timestamp),
                        .microseconds(e.receivedAt ?? Timestamps.microseconds(Date())), .text(e.properties), .text(e.context), .optional(e.previousId), .optional(e.groupId),
                    ])
                }
            }
            try c.query(
                """
                INSERT INTO event_ids (app, message_id, seq, received_at)
                SELECT app, message_id, seq, received_at FROM events e
                WHERE NOT EXISTS (SELECT 1 FROM event_ids i WHERE i.app = e.app AND i.message_id = e.message_id)
                ON CONFLICT DO NOTHING
                """)
        }
    }

    /// Random journeys through every configured funnel, days in the past, with
    /// drop-offs, repeats, anonymous-then-identified persons and duplicates.
    /// They start at a UTC midnight, so a seed puts the same persons on the
    /// same cohort days whatever the hour the tests run (from 10 days ago, a
    /// late-afternoon start left the first UTC day with a fifth of its persons).
    ///
    /// With `detours`, persons also do other things between steps and after
    /// their last one (some past their window, some at the very time of a
    /// step): help and failure events, a screen, an identify; Android
    /// persons fail more and leave more after failing. The drop-off
    /// diagnostics' tests need them.
    ///
    /// With `aliases`, some persons sign in as a server-side library does it
    /// (an `alias` from their anonymous id to their user id, then events with
    /// the user id alone), some are renamed after their last step (an alias
    /// from their user id to a new one, which sends one more event), and
    /// some of those are renamed back (a loop of aliases).
    public static func journeys(
        configuration: FunnelConfiguration, personsPerFunnel: Int, seed: UInt64, daysAgo: Int = 10, detours: Bool = false,
        aliases: Bool = false
    ) -> [SeedEvent] {
        var rng = SplitMix(seed: seed)
        let day: Int64 = 86_400_000_000
        let base = (Timestamps.microseconds(Date()) / day - Int64(daysAgo)) * day
        var events: [SeedEvent] = []
        for funnel in configuration.funnels {
            let required = funnel.requiredStepIndices
            for p in 0..<personsPerFunnel {
                let anonymous = "\(funnel.name)-anon-\(p)"
                let user = rng.next() % 3 == 0 ? "\(funnel.name)-user-\(p)" : nil
                var t = base + Int64(rng.next() % 5) * day + Int64(rng.next() % 86_400) * 1_000_000
                let stop = Int(rng.next() % UInt64(required.count + 2))
                let serverSide = aliases && user != nil && p % 5 == 1
                var aliased = false
                for (position, stepIndex) in required.enumerated() where position <= stop {
                    guard let matcher = funnel.steps[stepIndex].matchers.first else { continue }
                    t += Int64(rng.next() % 1800) * 1_000_000
                    let identified = user != nil && position >= required.count / 2
                    var properties: [String: String] = [:]
                    for (path, value) in matcher.conditions where path.hasPrefix("properties.") {
                        properties[String(path.dropFirst("properties.".count))] = value
                    }
                    properties["auth_method"] = ["email", "google", "apple"][p % 3]
                    properties["flow_version"] = p % 2 == 0 ? "v2" : "v3"
                    if serverSide && identified && !aliased {
                        events.append(SeedEvent(
                            app: funnel.app, type: "alias", messageId: "\(funnel.name)-\(p)-alias", userId: user,
                            timestamp: t - 1_000_000, previousId: anonymous))
                        aliased = true
                    }
                    let event = SeedEvent(
                        app: funnel.app, type: matcher.kind == .screen ? "screen" : "track",
                        messageId: "\(funnel.name)-\(p)-\(position)", event: matcher.name,
                        anonymousId: serverSide && identified ? nil : anonymous,
                        userId: identified ? user : nil, timestamp: t, properties: json(properties),
                        context: p % 4 == 0 ? #"{"os": {"name": "Android"}, "app": {"version": "2.2.0"}}"# : #"{"os": {"name": "iOS"}, "app": {"version": "2.3.0"}}"#)
                    events.append(event)
                    if rng.next() % 10 == 0 {  // the same screen again after a resume
                        var again = event
                        again.messageId += "-again"
                        again.timestamp += 5_000_000
                        events.append(again)
                    }
                    guard detours else { continue }
                    let android = p % 4 == 0
                    let last = position == min(stop, required.count - 1)
                    let count = last ? Int(rng.next() % 4) : (rng.next() % 3 == 0 ? 1 : 0)
                    for n in 0..<count {
                        // After the last step, up to 30 h later: some fall past a 24 h window.
                        let offset = Int64(rng.next() % (last ? 108_000 : 1_200)) * 1_000_000 * (rng.next() % 8 == 0 ? 0 : 1)
                        let pick = Int(rng.next() % 6)
                        let (type, name): (String, String?) =
                            pick == 0 ? ("identify", nil)
                            : pick == 1 ? ("screen", "Settings")
                            : pick <= 3 && (android || last) ? ("track", "otp_failed") : ("track", "help_opened")
                        events.append(SeedEvent(
                            app: funnel.app, type: type, messageId: "\(funnel.name)-\(p)-\(position)-detour-\(n)", event: name,
                            anonymousId: anonymous, userId: identified ? user : nil, timestamp: t + offset, properties: "{}",
                            context: event.context))
                    }
                }
                if aliases, let user, p % 7 == 2, let last = events.last {
                    let renamed = user + "-renamed"
                    events.append(SeedEvent(
                        app: funnel.app, type: "alias", messageId: "\(funnel.name)-\(p)-rename", userId: renamed,
                        timestamp: last.timestamp + 60_000_000, previousId: user))
                    var again = last
                    again.messageId = "\(funnel.name)-\(p)-after-rename"
                    again.userId = renamed
                    again.anonymousId = nil
                    again.timestamp += 120_000_000
                    events.append(again)
                    if p % 3 == 0 {
                        events.append(SeedEvent(
                            app: funnel.app, type: "alias", messageId: "\(funnel.name)-\(p)-rename-back", userId: user,
                            timestamp: last.timestamp + 180_000_000, previousId: renamed))
                    }
                }
            }
        }
        return events
    }

    public static func json(_ values: [String: String]) -> String {
        String(decoding: (try? JSONSerialization.data(withJSONObject: values, options: [.sortedKeys])) ?? Data("{}".utf8), as: UTF8.self)
    }
}

/// SplitMix64: tiny and seedable, so a failing random case reproduces exactly.
public struct SplitMix: RandomNumberGenerator, Sendable {
    var state: UInt64
    public init(seed: UInt64) { state = seed }
    /// Uniform in [0, 1).
    public mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The projection tables as text, row by row, for exact comparisons.
public enum TableDump {
    public static let queries = [
        "funnel_persons": "SELECT * FROM funnel_persons ORDER BY funnel, person_id",
        "funnel_daily": "SELECT * FROM funnel_daily ORDER BY funnel, cohort_day, step_index",
        "funnel_cohorts": "SELECT * FROM funnel_cohorts ORDER BY funnel, cohort_day",
        "identity_links": "SELECT * FROM identity_links ORDER BY app, anonymous_id",
        "funnel_targets": "SELECT * FROM funnel_targets ORDER BY funnel, name",
        "funnel_tallies": "SELECT * FROM funnel_tallies ORDER BY funnel, cohort_day",
        "funnel_person_diagnostics": "SELECT * FROM funnel_person_diagnostics ORDER BY app, person_id, funnel",
        "funnel_step_lingering": "SELECT * FROM funnel_step_lingering ORDER BY funnel, cohort_day, step_index",
        "funnel_dropoff_next": "SELECT * FROM funnel_dropoff_next ORDER BY funnel, cohort_day, step_index, label",
        "funnel_driver_counts": "SELECT * FROM funnel_driver_counts ORDER BY funnel, cohort_day, from_index, kind, dimension, value",
        "funnel_person_retention": "SELECT * FROM funnel_person_retention ORDER BY app, person_id, funnel",
        "funnel_retention_starts": "SELECT * FROM funnel_retention_starts ORDER BY funnel, cohort_day, completed, day_n",
        "event_catalog_days": "SELECT * FROM event_catalog_days ORDER BY app, type, event, day, app_version, os_name",
        "event_catalog_properties": "SELECT * FROM event_catalog_properties ORDER BY app, type, event, app_version, path, json_type",
        "event_catalog_senders": "SELECT * FROM event_catalog_senders ORDER BY app, day, sender",
    ]

    /// `funnel_retention`, which is not in `queries`: its counts are the
    /// clock's (who is eligible at the run), so only runs at the same time
    /// compare equal. Without computed_at: an incremental run leaves the rows
    /// it did not change as an earlier run wrote them.
    public static let retentionQuery = """
        SELECT funnel, app, cohort_day, day_n, completed, eligible, retained, pending, next_eligible_after
        FROM funnel_retention ORDER BY funnel, cohort_day, day_n, completed
        """

    public static func dump(_ c: Connection) throws -> [String: [String]] {
        var out: [String: [String]] = [:]
        for (table, sql) in queries { out[table] = try rows(c, sql) }
        return out
    }

    /// `sql`'s rows, each its values as text joined by "|" (NULL as "∅").
    public static func rows(_ c: Connection, _ sql: String) throws -> [String] {
        try c.query(sql).rows.map { row in (0..<row.count).map { row.text(at: $0) ?? "∅" }.joined(separator: "|") }
    }
}
