import Funnels
import LibPQ

/// The groups a funnel that counts groups (`aggregate_by: group`,
/// docs/funnels.md "Counting groups") is evaluated for. To the job a group
/// is one more unit beside the persons: its timeline is every event of its
/// members (the persons whose `group` calls name it), each member's events
/// handed to it as they are handed to the member, and its rows in the
/// per-person tables are keyed by `unit(of:)`. That key is the group's id
/// behind a unit separator, which no person's id can start with (ingestion
/// refuses control characters in ids): a group's rows and a person's never
/// share a key, so the incremental run's deletes, window closes and lookups
/// by person leave groups alone, and the analysts' views show the group's id.
///
/// An incremental run recomputes a group whole, with all its members, when
/// any member has a new event, is erased, or has ids change hands: a
/// member's activity is the group's too, and a new member brings all their
/// events.
enum GroupMembership {
    typealias Key = NewEvents.Key

    /// The unit key of group `group`.
    static func unit(of group: String) -> String { "\u{1F}" + group }

    /// Whether `unit` is a group's key (`unit(of:)`) rather than a person's.
    static func isGroup(_ unit: String) -> Bool { unit.utf8.first == 0x1F }

    /// A group call's sender: its user id, else its anonymous id, as a
    /// message's person is found (docs/funnels.md, "Persons").
    private static let sender = "COALESCE(e.user_id, e.anonymous_id)"

    /// Every member of `app`'s groups, as person -> their groups' units,
    /// each sender taken to the person `persons` (id -> person, where not
    /// itself: `IdentityLinker.rebuild`) names. For a rebuild: one read of
    /// the app's group calls, by their index.
    static func all(_ c: Connection, app: String, persons: [String: String]) throws -> [String: [String]] {
        var units: [String: Set<String>] = [:]
        for row in try c.query(
            """
            SELECT DISTINCT \(sender), e.group_id FROM events e
            WHERE e.app = $1 AND e.group_id IS NOT NULL AND e.type = 'group'
            """, [.text(app)]
        ).rows {
            let id = try row.decode(String.self, at: 0)
            units[persons[id] ?? id, default: []].insert(unit(of: try row.decode(String.self, at: 1)))
        }
        return units.mapValues { $0.sorted() }
    }

    /// What an incremental run recomputes of the groups of `apps` (the apps
    /// with a funnel counting groups): the groups of `persons` (by any of
    /// their ids), every group of an app in `everyGroup` (an erasure took
    /// members whose calls are gone, so their groups cannot be found) and
    /// every group unit stored for such an app. Returns the groups' units
    /// (app, unit) and, per member person of them, the units it belongs to.
    static func touched(
        _ c: Connection, persons: [Key], everyGroup: Set<String>
    ) throws -> (units: Set<Key>, members: [Key: [String]]) {
        var groups = Set<Key>()
        // One index probe per id of each person (`events_group_sender`), its
        // ids found by their links (`identity_links_person`).
        for row in try c.query(
            """
            SELECT DISTINCT t.app, g.group_id FROM unnest($1::text[], $2::text[]) AS t(app, person)
            CROSS JOIN LATERAL (
                SELECT t.person AS id
                UNION SELECT l.anonymous_id FROM identity_links l WHERE l.app = t.app AND l.person_id = t.person) i
            CROSS JOIN LATERAL (
                SELECT e.group_id FROM events e
                WHERE e.app = t.app AND \(sender) = i.id AND e.group_id IS NOT NULL AND e.type = 'group' OFFSET 0) g
            """, Key.parameters(persons)
        ).rows {
            groups.insert(Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1)))
        }
        var units = Set(groups.map { Key(app: $0.app, id: unit(of: $0.id)) })
        if !everyGroup.isEmpty {
            let apps = PostgresValue.textArray(everyGroup.sorted())
            for row in try c.query(
                "SELECT DISTINCT e.app, e.group_id FROM events e WHERE e.app = ANY($1::text[]) AND e.group_id IS NOT NULL AND e.type = 'group'",
                [apps]
            ).rows {
                let group = Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1))
                groups.insert(group)
                units.insert(Key(app: group.app, id: unit(of: group.id)))
            }
            for row in try c.query(
                "SELECT DISTINCT app, person_id FROM funnel_persons WHERE app = ANY($1::text[]) AND starts_with(person_id, chr(31))",
                [apps]
            ).rows {
                units.insert(Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1)))
            }
        }
        // The groups' members, each call's sender taken to its person.
        let sorted = groups.sorted { ($0.app, $0.id) < ($1.app, $1.id) }
        var members: [Key: Set<String>] = [:]
        for row in try c.query(
            """
            SELECT DISTINCT g.app, g.group_id, COALESCE(l.person_id, e.id) FROM unnest($1::text[], $2::text[]) AS g(app, group_id)
            CROSS JOIN LATERAL (
                SELECT \(sender) AS id FROM events e
                WHERE e.app = g.app AND e.group_id = g.group_id AND e.type = 'group' OFFSET 0) e
            LEFT JOIN identity_links l ON l.app = g.app AND l.anonymous_id = e.id
            """, Key.parameters(sorted)
        ).rows {
            let app = try row.decode(String.self, at: 0)
            members[Key(app: app, id: try row.decode(String.self, at: 2)), default: []].insert(unit(of: try row.decode(String.self, at: 1)))
        }
        return (units, members.mapValues { $0.sorted() })
    }
}
