import Funnels
import LibPQ
import LogReading

/// The groups a funnel that counts groups (`aggregate_by: group`,
/// docs/funnels.md "Counting groups") is evaluated for. To the job a group
/// is one more unit beside the persons: its timeline is every event of its
/// members (the persons whose `group` calls name it), each member's events
/// handed to it as they are handed to the member, and its rows in the
/// per-person tables are keyed by `HistoryUnit.unit(of:)`. That key is the group's id
/// behind a unit separator, which no person's id can start with (ingestion
/// refuses control characters in ids): a group's rows and a person's never
/// share a key, so the incremental run's deletes, window closes and lookups
/// by person leave groups alone, and the analysts' views show the group's id.
///
/// An incremental run recomputes a group whole, from all its members'
/// events, when a member has a new event that may change an outcome, is
/// erased, or has ids change hands (a new member brings all their events);
/// a member's activity is the group's, and goes where a person's goes
/// (`PersonActivity`): into the stored rows it can matter to, or, inside a
/// stored window, into a recompute. The members are read for it, not
/// recomputed.
enum GroupMembership {
    typealias Key = NewEvents.Key

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
            units[persons[id] ?? id, default: []].insert(HistoryUnit.unit(of: try row.decode(String.self, at: 1)))
        }
        return units.mapValues { $0.sorted() }
    }

    /// The groups each of `persons` sent a group call naming, by any of
    /// their ids, with how many calls: person -> group id -> calls. One
    /// index probe per id of each person (`events_group_sender`), its ids
    /// found by their links (`identity_links_person`).
    static func groups(_ c: Connection, of persons: [Key], dialect: SQLDialect) throws -> [Key: [String: Int]] {
        var groups: [Key: [String: Int]] = [:]
        guard !persons.isEmpty else { return groups }
        // On Citus the links (by device) and the log (by `person_key`) are
        // not joined on their distribution columns: the ids come first, as an
        // intermediate result, and each shard joins its calls to them.
        let query =
            switch dialect {
            case .postgres:
                """
                SELECT t.app, t.person, g.group_id, count(*) FROM unnest($1::text[], $2::text[]) AS t(app, person)
                CROSS JOIN LATERAL (
                    SELECT t.person AS id
                    UNION SELECT l.anonymous_id FROM identity_links l WHERE l.app = t.app AND l.person_id = t.person) i
                CROSS JOIN LATERAL (
                    SELECT e.group_id FROM events e
                    WHERE e.app = t.app AND \(sender) = i.id AND e.group_id IS NOT NULL AND e.type = 'group' OFFSET 0) g
                GROUP BY 1, 2, 3
                """
            case .citus:
                """
                WITH ids AS MATERIALIZED (
                    SELECT t.app, t.person, t.person AS id FROM unnest($1::text[], $2::text[]) AS t(app, person)
                    UNION SELECT t.app, t.person, l.anonymous_id FROM unnest($1::text[], $2::text[]) AS t(app, person)
                    JOIN identity_links l ON l.app = t.app AND l.person_id = t.person)
                SELECT i.app, i.person, e.group_id, count(*) FROM ids i
                JOIN events e ON e.app = i.app AND \(sender) = i.id AND e.group_id IS NOT NULL AND e.type = 'group'
                GROUP BY 1, 2, 3
                """
            }
        for row in try c.query(query, Key.parameters(persons)).rows {
            groups[Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1)), default: [:]][
                try row.decode(String.self, at: 2)] = try row.decode(Int.self, at: 3)
        }
        return groups
    }

    /// The groups of `funnels` stored in progress without the end of their
    /// window (rows from before it was stored): the clock alone may change them.
    static func openWithoutEnd(_ c: Connection, of funnels: [Funnel]) throws -> Set<Key> {
        var groups = Set<Key>()
        for row in try c.query(
            "SELECT DISTINCT app, substr(person_id, 2) FROM funnel_persons WHERE funnel = ANY($1::text[]) AND in_progress AND open_until IS NULL",
            [.textArray(funnels.map(\.name))]
        ).rows {
            groups.insert(Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1)))
        }
        return groups
    }

    /// Every group of `funnels`' apps, and every group stored for them
    /// (app, group id): after an erasure, whose person's calls are gone.
    static func every(_ c: Connection, of funnels: [Funnel]) throws -> Set<Key> {
        var groups = Set<Key>()
        guard !funnels.isEmpty else { return groups }
        for row in try c.query(
            "SELECT DISTINCT e.app, e.group_id FROM events e WHERE e.app = ANY($1::text[]) AND e.group_id IS NOT NULL AND e.type = 'group'",
            [.textArray(Array(Set(funnels.map(\.app))).sorted())]
        ).rows {
            groups.insert(Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1)))
        }
        for row in try c.query(
            "SELECT DISTINCT app, substr(person_id, 2) FROM funnel_persons WHERE funnel = ANY($1::text[])", [.textArray(funnels.map(\.name))]
        ).rows {
            groups.insert(Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1)))
        }
        return groups
    }

    /// The members of `groups` (app, group id), each call's sender taken to
    /// its person: person -> the units of those of the groups it is in.
    static func members(_ c: Connection, of groups: Set<Key>, dialect: SQLDialect) throws -> [Key: [String]] {
        var members: [Key: Set<String>] = [:]
        guard !groups.isEmpty else { return [:] }
        // On Citus, as in `groups`: the senders first, then their links.
        let query =
            switch dialect {
            case .postgres:
                """
                SELECT DISTINCT g.app, g.group_id, COALESCE(l.person_id, e.id) FROM unnest($1::text[], $2::text[]) AS g(app, group_id)
                CROSS JOIN LATERAL (
                    SELECT \(sender) AS id FROM events e
                    WHERE e.app = g.app AND e.group_id = g.group_id AND e.type = 'group' OFFSET 0) e
                LEFT JOIN LATERAL (
                    SELECT l.person_id FROM identity_links l WHERE l.app = g.app AND l.anonymous_id = e.id OFFSET 0) l ON true
                """
            case .citus:
                """
                WITH senders AS MATERIALIZED (
                    SELECT DISTINCT g.app, g.group_id, \(sender) AS id FROM unnest($1::text[], $2::text[]) AS g(app, group_id)
                    JOIN events e ON e.app = g.app AND e.group_id = g.group_id AND e.type = 'group')
                SELECT DISTINCT s.app, s.group_id, COALESCE(l.person_id, s.id) FROM senders s
                LEFT JOIN identity_links l ON l.app = s.app AND l.anonymous_id = s.id
                """
            }
        for row in try c.query(query, Key.parameters(TouchedPersons.sorted(groups))).rows {
            let app = try row.decode(String.self, at: 0)
            members[Key(app: app, id: try row.decode(String.self, at: 2)), default: []].insert(HistoryUnit.unit(of: try row.decode(String.self, at: 1)))
        }
        return members.mapValues { $0.sorted() }
    }
}
