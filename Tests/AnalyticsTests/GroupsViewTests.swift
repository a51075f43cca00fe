import Foundation
import LibPQ
import LocalPostgres
import Testing

/// `analytics.groups` and `analytics.group_members`, read as the analyst,
/// against what the group calls planted say.
@Suite("groups from Segment's group calls")
struct GroupsViewTests {
    struct Call {
        let group: String
        let user: String?
        let device: String
        let at: Int
        let traits: String
    }

    @Test("each group's latest traits, members as persons and calls; each member's first and last call")
    func groupsAndMembers() async throws {
        let db = try await TestDatabase.create()
        let owner = db.pool(maxConnections: 1)
        let calls = [
            Call(group: "acme", user: "u1", device: "d1", at: 1, traits: #"{"name": "Acme", "plan": "free"}"#),
            Call(group: "acme", user: "u1", device: "d1", at: 2, traits: #"{"plan": "pro"}"#),
            Call(group: "acme", user: nil, device: "d2", at: 3, traits: "{}"),  // d2 is u2's device
            Call(group: "globex", user: "u3", device: "d3", at: 4, traits: #"{"name": "Globex"}"#),
            Call(group: "acme", user: "u3", device: "d3", at: 5, traits: #"{"employees": 40}"#),
        ]
        for (n, call) in calls.enumerated() {
            try await owner.query(
                """
                INSERT INTO events (app, type, message_id, anonymous_id, user_id, "timestamp", received_at, traits, group_id)
                VALUES ('ops', 'group', $1, $2, $3, to_timestamp($4), now(), $5::jsonb, $6)
                """, [.text("g\(n)"), .text(call.device), .optional(call.user), .int(Int64(call.at)), .text(call.traits), .text(call.group)])
        }
        // A track event carrying a group id is not a group call.
        try await owner.query(
            """
            INSERT INTO events (app, type, message_id, event, anonymous_id, "timestamp", received_at, group_id)
            VALUES ('ops', 'track', 't', 'welcome', 'd9', to_timestamp(9), now(), 'acme')
            """)
        try await owner.query("INSERT INTO identity_links (app, anonymous_id, user_id, first_seen, person_id) VALUES ('ops', 'd2', 'u2', to_timestamp(0), 'u2')")

        // The independent count: the calls above, persons named as analytics.events names them.
        let person = { (call: Call) in call.user ?? (call.device == "d2" ? "u2" : call.device) }
        var expectedGroups: [String] = []
        var expectedMembers: [String] = []
        for group in Set(calls.map(\.group)).sorted() {
            let mine = calls.filter { $0.group == group }
            var traits: [String: Any] = [:]
            for call in mine.sorted(by: { $0.at < $1.at }) {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(call.traits.utf8)) as? [String: Any])
                traits.merge(object) { _, later in later }
            }
            let traitsText = traits.keys.sorted().map { "\($0)=\(traits[$0]!)" }.joined(separator: ",")
            expectedGroups.append("\(group)|\(traitsText)|\(mine.map(\.at).min()!)|\(mine.map(\.at).max()!)|\(Set(mine.map(person)).count)|\(mine.count)")
            for member in Set(mine.map(person)).sorted() {
                let theirs = mine.filter { person($0) == member }.map(\.at)
                expectedMembers.append("\(group)|\(member)|\(theirs.min()!)|\(theirs.max()!)")
            }
        }

        let analyst = ConnectionPool(url: try db.url(as: "onramp_analyst"), maxConnections: 1)
        let groups = try await analyst.query(
            """
            SELECT group_id, (SELECT string_agg(key || '=' || (value #>> '{}'), ',' ORDER BY key) FROM jsonb_each(traits)),
                   extract(epoch FROM first_seen)::int, extract(epoch FROM last_seen)::int, members, calls
            FROM analytics.groups WHERE app = 'ops' ORDER BY group_id
            """
        ).rows.map { row in (0..<6).map { row.text(at: $0) ?? "" }.joined(separator: "|") }
        #expect(groups == expectedGroups)
        let members = try await analyst.query(
            """
            SELECT group_id, person_id, extract(epoch FROM first_seen)::int, extract(epoch FROM last_seen)::int
            FROM analytics.group_members WHERE app = 'ops' ORDER BY group_id, person_id
            """
        ).rows.map { row in (0..<4).map { row.text(at: $0) ?? "" }.joined(separator: "|") }
        #expect(members == expectedMembers)
        await analyst.close()
        await owner.close()
        try await db.drop()
    }
}
