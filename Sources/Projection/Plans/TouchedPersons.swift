import Funnels
import LibPQ
import LogReading

/// The persons an incremental run recomputes. They are worked out here, in
/// sets, from the day's identities and key-by-key link lookups, and written
/// once, unique, to temp tables: `touched(app, person)` on the run's
/// session, for the deletes (and on the reader's, for what it reads of their
/// stored rows), and `touched_keys(app, id)` on the reader's, for the
/// history reads: every user id and anonymous id whose events belong to a
/// touched person, or to a member of a touched group (`GroupMembership`):
/// a group is recomputed from its members' events, the members themselves
/// only if touched. The person an id's events belong to (its link's person,
/// or itself), and each member's groups, are returned (`identities`): the
/// reader sees neither the run's new links nor its temp tables, hence the
/// persons resolved here.
///
/// Built in SQL, the tables would cost B-tree inserts and `ON CONFLICT`
/// checks into temp tables kept unique by index.
enum TouchedPersons {
    typealias Key = NewEvents.Key

    /// The persons (and groups of `groupFunnels`, those counting groups:
    /// `GroupMembership`) to recompute, by app; by app, the ids among their keys whose events
    /// belong to another person (id -> person) and the groups each member
    /// is recomputed for; and those whose new events are activity only
    /// (`PersonActivity`), their stored outcomes looked up as `lookup` says.
    static func collect(
        _ c: Connection, day: NewEvents, relinks: [IdentityLinker.Relink], groupFunnels: [Funnel], lookup: PersonActivity.Lookup,
        reader: Connection, prefetched: Pending<PersonActivity.Found>?
    ) throws -> (touched: [String: Set<String>], identities: [String: PersonHistoryReader.Identities], activity: [PersonActivity]) {
        // Persons with new events that may change an outcome (identity
        // already updated for them): each id (a user id, or the anonymous id
        // of an event without one) belongs to the person its link names, or
        // is one itself. So does a user id with activity only, when an alias
        // joined it to another: that person is recomputed.
        var persons = Set<Key>()
        let aliasedActivity = Set(day.userActivity.keys).subtracting(day.users)
        let ids = Self.sorted(day.users.union(day.anonymous).union(aliasedActivity))
        for (key, person) in zip(ids, try linkedPersons(c, of: ids, dialect: lookup.dialect)) {
            if day.users.contains(key) || day.anonymous.contains(key) {
                persons.insert(Key(app: key.app, id: person ?? key.id))
            } else if let person, person != key.id {
                persons.insert(Key(app: key.app, id: person))
            }
        }
        // A relinked id's events join their new person, whatever they are.
        for relink in relinks { persons.insert(Key(app: relink.app, id: relink.person)) }
        // Persons who lost an anonymous id to a (new or earlier) user, if they
        // have outcomes stored: losing events cannot make a person enter a
        // funnel. Most relinks are a new device's first sign-in, whose
        // anonymous self never had any. One index probe per relink, as in
        // `linkedPersons`: as EXISTS, the planner hashed every stored outcome.
        // Citus refuses the LIMIT there, and plans the join shard by shard.
        if !relinks.isEmpty {
            let probe =
                switch lookup.dialect {
                case .postgres:
                    "CROSS JOIN LATERAL (SELECT 1 FROM funnel_persons f WHERE f.app = r.app AND f.person_id = r.person LIMIT 1) f"
                case .citus: "JOIN funnel_persons f ON f.app = r.app AND f.person_id = r.person"
                }
            for row in try c.query(
                """
                SELECT r.app, r.person FROM unnest($1::text[], $2::text[]) AS r(app, person)
                \(probe)
                """,
                [.textArray(relinks.map(\.app)), .textArray(relinks.map(\.previousPerson))]
            ).rows {
                persons.insert(Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1)))
            }
        }
        // Persons in progress last time whose window's end was not stored
        // (rows from before migration 006): their state may have changed with
        // the clock alone. The others' windows are closed in place
        // (`OutcomeStore.closeWindows`).
        // (Groups' likewise, in `TouchedGroups`, their members read.)
        for row in try c.query(
            "SELECT DISTINCT app, person_id FROM funnel_persons WHERE in_progress AND open_until IS NULL AND NOT starts_with(person_id, chr(31))"
        ).rows {
            persons.insert(Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1)))
        }
        var activity = try activityOnly(c, day: day, recomputed: &persons, lookup: lookup, prefetched: prefetched)
        let (units, members, groupActivity) = try TouchedGroups.collect(c, day: day, relinks: relinks, funnels: groupFunnels, lookup: lookup)
        activity += groupActivity

        // Each person is a key of its own (its events go to the person its
        // link names, if it has one: that person is recomputed too), and so
        // is every id whose link names it.
        var keys: [Key: String] = [:]
        var unresolved = Self.sorted(persons)
        while !unresolved.isEmpty {
            var next: [Key] = []
            for (key, person) in zip(unresolved, try linkedPersons(c, of: unresolved, dialect: lookup.dialect)) {
                keys[key] = person ?? key.id
                let owner = Key(app: key.app, id: person ?? key.id)
                if persons.insert(owner).inserted { next.append(owner) }
            }
            unresolved = Self.sorted(next)
        }
        // A touched group's members are read, not recomputed: each is a person already.
        for member in members.keys where keys[member] == nil { keys[member] = member.id }
        for row in try c.query(
            """
            SELECT l.app, l.anonymous_id, l.person_id FROM unnest($1::text[], $2::text[]) AS t(app, person)
            CROSS JOIN LATERAL (SELECT * FROM identity_links l WHERE l.app = t.app AND l.person_id = t.person \(lookup.dialect.fence)) l
            """, Key.parameters(Self.sorted(persons.union(members.keys)))
        ).rows {
            keys[Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1))] = try row.decode(String.self, at: 2)
        }
        let touched = Self.sorted(persons.union(units))

        // The persons on the run's session, for the deletes, and on the
        // reader's, for what it reads of their stored rows (`PersonAnalysis.touchedDayParts`).
        for session in reader === c ? [c] : [c, reader] {
            try session.executeScript("CREATE TEMP TABLE touched (app text, person text) ON COMMIT DROP")
            try session.copyIn("COPY touched FROM STDIN") { writer in
                for key in touched { try writer.writeRow([.text(key.app), .text(key.id)]) }
            }
        }
        try reader.executeScript("CREATE TEMP TABLE touched_keys (app text, id text) ON COMMIT DROP")
        try reader.copyIn("COPY touched_keys FROM STDIN") { writer in
            for key in Self.sorted(keys.keys) { try writer.writeRow([.text(key.app), .text(key.id)]) }
        }
        var result: [String: Set<String>] = [:]
        for key in touched { result[key.app, default: []].insert(key.id) }
        var identities: [String: PersonHistoryReader.Identities] = [:]
        for (key, person) in keys where person != key.id { identities[key.app, default: .init()].owners[key.id] = person }
        for (member, units) in members { identities[member.app, default: .init()].groups[member.id] = units }
        return (result, identities, activity)
    }

    /// The persons of the day's activity not already `recomputed`: those
    /// with an activity inside a window a stored fact looks at join
    /// `recomputed` (the drop-off facts read every event of the window);
    /// the others with stored outcomes the activity can matter to are
    /// returned (`PersonActivity.Relevance`). Persons with none are left
    /// alone: activity cannot start a funnel, nor change a row it cannot reach.
    private static func activityOnly(
        _ c: Connection, day: NewEvents, recomputed: inout Set<Key>, lookup: PersonActivity.Lookup,
        prefetched: Pending<PersonActivity.Found>?
    ) throws -> [PersonActivity] {
        // The anonymous ids' activity, by the person it belongs to; the user
        // ids' is `day.userActivity`, read in place rather than copied less
        // the recomputed.
        var anonymousEvents: [Key: [NewEvents.Activity]] = [:]
        let anonymous = Self.sorted(day.anonymousActivity.keys)
        for (key, user) in zip(anonymous, try linkedPersons(c, of: anonymous, dialect: lookup.dialect)) {
            let person = Key(app: key.app, id: user ?? key.id)
            guard !recomputed.contains(person) else { continue }
            anonymousEvents[person, default: []] += day.anonymousActivity[key] ?? []
        }
        // The active keys' stored outcomes were looked up meanwhile; the
        // persons of anonymous ids linked to a user without activity of
        // their own now.
        let found = try prefetched?.wait() ?? [:]
        let rest = prefetched != nil
            ? anonymousEvents.keys.filter { !day.isActivityKey($0) }
            : Array(Set(day.userActivity.keys.filter { !recomputed.contains($0) }).union(anonymousEvents.keys))
        let (keys, byScan) = lookup.ordered(rest)
        let restFound = try PersonActivity.starts(c, of: keys[...], lookup: lookup, byScan: byScan)
        var activity: [PersonActivity] = []
        activity.reserveCapacity(found.count + restFound.count)
        // Prefetched, then recomputed; an anonymous id linked to a user is
        // not a person, and what is stored under it is not theirs. (The two
        // are read side by side: merged into the prefetched ones, which the
        // lookup still holds, those would all be copied whole.)
        func take(_ person: Key, _ starts: [PersonActivity.Start]) {
            guard !recomputed.contains(person) else { return }
            let userEvents = day.userActivity[person], linkedEvents = anonymousEvents[person]
            guard userEvents != nil || linkedEvents != nil else { return }
            let personEvents = linkedEvents.map { (userEvents ?? []) + $0 } ?? userEvents ?? []
            if PersonActivity.fallsInWindow(personEvents, of: starts) {
                recomputed.insert(person)
            } else {
                activity.append(PersonActivity(app: person.app, person: person.id, events: personEvents, starts: starts))
            }
        }
        for (person, starts) in found { take(person, starts) }
        for (person, starts) in restFound where found[person] == nil { take(person, starts) }
        return activity
    }

    /// Keys in the order of the indexes they are looked up in: key by key
    /// lookups (and the temp tables' rows, which later statements look up
    /// by) then touch neighbouring index pages, where hash order would have
    /// each one read a page of its own.
    static func sorted(_ keys: some Sequence<Key>) -> [Key] {
        keys.sorted { ($0.app, $0.id) < ($1.app, $1.id) }
    }

    /// The person each key's link names, or nil when it has none, in order:
    /// one index lookup per key (LATERAL, kept apart by the dialect's fence,
    /// where the planner would otherwise hash every link of the table).
    static func linkedPersons(_ c: Connection, of keys: [Key], dialect: SQLDialect) throws -> [String?] {
        var users = [String?](repeating: nil, count: keys.count)
        guard !keys.isEmpty else { return users }
        for row in try c.query(
            """
            SELECT k.n, l.person_id FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(app, id, n)
            CROSS JOIN LATERAL (SELECT l.person_id FROM identity_links l WHERE l.app = k.app AND l.anonymous_id = k.id \(dialect.fence)) l
            """, Key.parameters(keys)
        ).rows {
            let n = try row.decode(Int.self, at: 0)
            guard keys.indices.contains(n - 1) else { throw PostgresError(.unexpectedResult, message: "link lookup returned key \(n)") }
            users[n - 1] = try row.decode(String.self, at: 1)
        }
        return users
    }
}
