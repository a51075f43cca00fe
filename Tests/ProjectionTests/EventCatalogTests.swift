import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection
import TestSupport
import Testing

/// The event catalogue the nightly job keeps (docs/tracking-health.md),
/// against a count of the seeded events made here, in Swift, from the
/// events as they were sent.
@Suite("the event catalogue, on a real PostgreSQL")
struct EventCatalogTests {
    struct DayKey: Hashable, CustomStringConvertible {
        let app, type, event, day, version, os: String
        var description: String { [app, type, event, day, version, os].joined(separator: "|") }
    }

    struct DayCount: Equatable {
        var events = 0
        var persons = Set<String>()
        var first = Int64.max, last = Int64.min
    }

    struct PathKey: Hashable, CustomStringConvertible {
        let app, type, event, version, path, jsonType: String
        var description: String { [app, type, event, version, path, jsonType].joined(separator: "|") }
    }

    /// A JSON value as its type, decoded here rather than by PostgreSQL.
    indirect enum JSON: Decodable {
        case null, boolean, number, string, array, object([String: JSON])

        init(from decoder: any Decoder) throws {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() { self = .null }
            else if (try? single.decode(Bool.self)) != nil { self = .boolean }
            else if (try? single.decode(Double.self)) != nil { self = .number }
            else if (try? single.decode(String.self)) != nil { self = .string }
            else if (try? single.decode([JSON].self)) != nil { self = .array }
            else { self = .object(try single.decode([String: JSON].self)) }
        }

        var name: String {
            switch self {
            case .null: "null"
            case .boolean: "boolean"
            case .number: "number"
            case .string: "string"
            case .array: "array"
            case .object: "object"
            }
        }
    }

    /// Every path under `properties`, four levels down, with its JSON type.
    static func paths(_ object: [String: JSON], prefix: String = "properties", depth: Int = 1) -> [(String, String)] {
        object.flatMap { key, value -> [(String, String)] in
            let path = prefix + "." + key
            if case .object(let nested) = value, depth < 4 { return [(path, "object")] + paths(nested, prefix: path, depth: depth + 1) }
            return [(path, value.name)]
        }
    }

    static func context(_ json: String, _ path: [String]) -> String {
        var value: Any? = try? JSONSerialization.jsonObject(with: Data(json.utf8))
        for key in path { value = (value as? [String: Any])?[key] }
        return value as? String ?? ""
    }

    @Test("over three nights, late events among them, every day's events, persons, first and last seen, and every property path's events equal a count of the events sent; counted whole it is the same")
    func catalogueAgainstTheEventsSent() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let configuration = try FunnelConfiguration.default()
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        var events = EventSeeder.journeys(configuration: configuration, personsPerFunnel: 30, seed: 17, aliases: true)
            + CompanyLog.events(seed: 4)
        // Some properties of every JSON type, nested, and one that changes type.
        for index in events.indices where index % 7 == 0 {
            events[index].properties = #"{"plan": {"tier": "pro", "seats": 3, "trial": true}, "tags": ["a"], "note": null}"#
        }
        for index in events.indices where index % 11 == 0 { events[index].properties = #"{"plan": "pro"}"# }
        var rng = SplitMix(seed: 5)
        events.shuffle(using: &rng)
        let third = events.count / 3
        var nights = [Array(events[..<third]), Array(events[third..<2 * third]), Array(events[(2 * third)...])]
        // A day long before the others: a device and a user on the first
        // night, the same device again, and one more, arriving late on the last.
        let longAgo = Timestamps.microseconds(Date()) - 40 * 86_400_000_000
        let late = [
            SeedEvent(app: "yoked", messageId: "long-ago-device", event: "onboarding_started", anonymousId: "dev-long-ago", timestamp: longAgo),
            SeedEvent(
                app: "yoked", messageId: "long-ago-user", event: "onboarding_started", anonymousId: "dev-other", userId: "u-long-ago",
                timestamp: longAgo + 1_000_000),
            SeedEvent(
                app: "yoked", messageId: "long-ago-again", event: "onboarding_started", anonymousId: "dev-long-ago", timestamp: longAgo + 2_000_000),
            SeedEvent(
                app: "yoked", messageId: "long-ago-late", event: "onboarding_started", anonymousId: "dev-late", timestamp: longAgo + 3_000_000),
        ]
        nights[0] += late[..<2]
        nights[2] += late[2...]
        events += late
        for night in nights {
            try await pool.withConnection { c in try EventSeeder.insert(c, night) }
            _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        }

        // The reference: the events as sent, each counted for the id that sent it.
        var days: [DayKey: DayCount] = [:]
        var properties: [PathKey: Int] = [:]
        var seen = Set<String>()
        for e in events where seen.insert(e.app + "|" + e.messageId).inserted {
            let version = Self.context(e.context, ["app", "version"])
            let key = DayKey(
                app: e.app, type: e.type, event: e.event ?? "", day: CohortCalendar.day(of: e.timestamp, in: TimeZone(identifier: "UTC")!),
                version: version, os: Self.context(e.context, ["os", "name"]))
            var count = days[key] ?? DayCount()
            count.events += 1
            count.persons.insert(try #require(e.userId ?? e.anonymousId))
            count.first = min(count.first, e.timestamp)
            count.last = max(count.last, e.timestamp)
            days[key] = count
            let object = try JSONDecoder().decode([String: JSON].self, from: Data(e.properties.utf8))
            for (path, type) in Self.paths(object) {
                properties[PathKey(app: e.app, type: e.type, event: e.event ?? "", version: version, path: path, jsonType: type), default: 0] += 1
            }
        }

        var stored: [DayKey: DayCount] = [:]
        for row in try await pool.query(
            """
            SELECT app, type, coalesce(event, ''), day::text, coalesce(app_version, ''), coalesce(os_name, ''), events, persons,
                   (extract(epoch FROM first_seen) * 1000000)::int8, (extract(epoch FROM last_seen) * 1000000)::int8
            FROM analytics.event_catalog
            """
        ).rows {
            let key = DayKey(
                app: try row.decode(String.self, at: 0), type: try row.decode(String.self, at: 1), event: try row.decode(String.self, at: 2),
                day: try row.decode(String.self, at: 3), version: try row.decode(String.self, at: 4), os: try row.decode(String.self, at: 5))
            let expected = days[key]
            #expect(try row.decode(Int.self, at: 6) == expected?.events, "\(key) events")
            #expect(try row.decode(Int.self, at: 7) == expected?.persons.count, "\(key) persons")
            #expect(try row.decode(Int64.self, at: 8) == expected?.first, "\(key) first seen")
            #expect(try row.decode(Int64.self, at: 9) == expected?.last, "\(key) last seen")
            stored[key] = expected
        }
        #expect(Set(stored.keys) == Set(days.keys))
        #expect(days.count > 100)

        var storedPaths: [PathKey: Int] = [:]
        for row in try await pool.query(
            "SELECT app, type, coalesce(event, ''), coalesce(app_version, ''), path, json_type, events FROM analytics.event_properties"
        ).rows {
            let key = PathKey(
                app: try row.decode(String.self, at: 0), type: try row.decode(String.self, at: 1), event: try row.decode(String.self, at: 2),
                version: try row.decode(String.self, at: 3), path: try row.decode(String.self, at: 4), jsonType: try row.decode(String.self, at: 5))
            storedPaths[key] = try row.decode(Int.self, at: 6)
        }
        #expect(storedPaths == properties)
        #expect(Set(properties.keys.map(\.jsonType)).isSuperset(of: ["string", "number", "boolean", "object", "array", "null"]))
        #expect(properties.keys.contains { $0.path == "properties.plan.tier" })

        // Counted whole from the log, it is the same.
        let incremental = try await pool.withConnection { try TableDump.dump($0) }
        try await pool.query("DELETE FROM event_catalog_state")
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        let whole = try await pool.withConnection { try TableDump.dump($0) }
        for table in ["event_catalog_days", "event_catalog_properties", "event_catalog_senders"] {
            #expect(whole[table] == incremental[table], "\(table)")
        }
        try await GroupFunnelJobTests.expectRebuildGives(incremental, pool, job)
        await pool.close()
        try await db.drop()
    }
}
