import Funnels
import LibPQ
import LogReading

/// Keeps `identity_links` (id -> the user it was first seen with, and the
/// person its links lead to) up to date from the events written since a
/// checkpoint, and says which ids' events moved to another person. The
/// order is `IdentityLink.isPreferred(over:)`'s: earliest sighting, then the
/// smallest user id, compared as bytes (`COLLATE "C"`, which is how Swift
/// orders normalised strings), and persons are found by the engine's
/// `IdentityResolver`, so an incremental run and a rebuild agree (tests
/// compare the two).
enum IdentityLinker {
    struct Relink: Hashable {
        let app: String
        /// The id whose events moved (a device's anonymous id, or a user id an alias joined to another).
        let anonymousId: String
        /// The person the id's events belonged to before (itself, or the old person).
        let previousPerson: String
        /// The person they belong to now.
        let person: String
    }

    /// One stored or new link, by app and id.
    private struct Row {
        let link: IdentityLink
        /// The person stored with it; nil for a new id.
        let storedPerson: String?
    }

    /// Stores the new events' links (`NewEvents.links`) where they win over
    /// the stored ones, finds the person of every id whose links now lead
    /// elsewhere and stores it; returns those ids. Each candidate's stored
    /// link is looked up by its key, so the cost follows the day and not all
    /// the links of the history, or, when the candidates are many against
    /// the stored links, by one scan of them (`PersonActivity.Lookup`).
    static func update(
        _ c: Connection, newLinks: [String: [String: IdentityLink]], byScan: Bool, dialect: SQLDialect
    ) throws -> [Relink] {
        try c.executeScript(
            "CREATE TEMP TABLE link_candidates (app text, anonymous_id text, user_id text, first_seen timestamptz) ON COMMIT DROP")
        try c.copyIn("COPY link_candidates FROM STDIN") { writer in
            // Key by key, in index order, as `TouchedPersons.sorted` says why.
            for (app, links) in byScan ? Array(newLinks) : newLinks.sorted(by: { $0.key < $1.key }) {
                for (anonymousId, link) in byScan ? Array(links) : links.sorted(by: { $0.key < $1.key }) {
                    try writer.writeRow([.text(app), .text(anonymousId), .text(link.userId), .microseconds(link.firstSeen)])
                }
            }
        }
        // By key: LATERAL, kept apart by the fence, one probe per candidate.
        // By scan: the links fenced off, so nothing can probe them.
        let stored = byScan
            ? """
              LEFT JOIN (SELECT app, anonymous_id, user_id, first_seen, person_id FROM identity_links \(dialect.fence)) l
                ON l.app = c.app AND l.anonymous_id = c.anonymous_id
              """
            : """
              LEFT JOIN LATERAL (
                  SELECT * FROM identity_links l WHERE l.app = c.app AND l.anonymous_id = c.anonymous_id \(dialect.fence)) l ON true
              """
        // A new id's person is found below; until then, its user.
        let changed = try c.query(
            """
            WITH changed AS (
                SELECT c.*, l.person_id AS old_person
                FROM link_candidates c
                \(stored)
                WHERE l.user_id IS NULL OR (c.first_seen, c.user_id COLLATE "C") < (l.first_seen, l.user_id COLLATE "C")
            ), written AS (
                INSERT INTO identity_links (app, anonymous_id, user_id, first_seen, person_id)
                SELECT app, anonymous_id, user_id, first_seen, user_id FROM changed
                ON CONFLICT (app, anonymous_id) DO UPDATE SET user_id = excluded.user_id, first_seen = excluded.first_seen
            )
            SELECT app, anonymous_id, user_id, (extract(epoch FROM first_seen) * 1000000)::int8, old_person FROM changed
            """)
        var rows: [NewEvents.Key: Row] = [:]
        var affected: [NewEvents.Key] = []
        for row in changed.rows {
            let key = NewEvents.Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1))
            rows[key] = Row(
                link: IdentityLink(userId: try row.decode(String.self, at: 2), firstSeen: try row.decode(Int64.self, at: 3)),
                storedPerson: try row.decode(String?.self, at: 4))
            affected.append(key)
        }
        guard !affected.isEmpty else { return [] }
        // Every id whose links pass through a changed one may lead
        // elsewhere now: the links to it, and to those, and so on (a user's
        // devices, the ids an alias joined to it).
        var frontier = affected
        while !frontier.isEmpty {
            var next: [NewEvents.Key] = []
            for (key, row) in try links(c, where: "l.user_id = k.id", of: frontier, dialect: dialect) where rows[key] == nil {
                rows[key] = row
                affected.append(key)
                next.append(key)
            }
            frontier = next
        }
        // Where they lead: each link's user, and its link, to the end.
        frontier = Array(Set(rows.map { NewEvents.Key(app: $0.key.app, id: $0.value.link.userId) }).filter { rows[$0] == nil })
        var loaded = Set(frontier)
        while !frontier.isEmpty {
            var next: [NewEvents.Key] = []
            for (key, row) in try links(c, where: "l.anonymous_id = k.id", of: frontier, dialect: dialect) where rows[key] == nil {
                rows[key] = row
                let user = NewEvents.Key(app: key.app, id: row.link.userId)
                if rows[user] == nil, loaded.insert(user).inserted { next.append(user) }
            }
            frontier = next
        }
        var graphs: [String: [String: IdentityLink]] = [:]
        for (key, row) in rows { graphs[key.app, default: [:]][key.id] = row.link }
        var memos: [String: [String: String]] = [:]
        var relinks: [Relink] = []
        var rewritten: [(key: NewEvents.Key, person: String)] = []
        for key in TouchedPersons.sorted(affected) {
            guard let row = rows[key] else { continue }
            let person = IdentityResolver.person(of: key.id, links: graphs[key.app] ?? [:], memo: &memos[key.app, default: [:]])
            // A new id's row holds its user, its person in most cases; before it, its events were its own.
            if (row.storedPerson ?? row.link.userId) != person { rewritten.append((key, person)) }
            let previous = row.storedPerson ?? key.id
            if previous != person { relinks.append(Relink(app: key.app, anonymousId: key.id, previousPerson: previous, person: person)) }
        }
        if !rewritten.isEmpty {
            try c.query(
                """
                UPDATE identity_links l SET person_id = u.person
                FROM unnest($1::text[], $2::text[], $3::text[]) AS u(app, id, person)
                WHERE l.app = u.app AND l.anonymous_id = u.id
                """, [.textArray(rewritten.map(\.key.app)), .textArray(rewritten.map(\.key.id)), .textArray(rewritten.map(\.person))])
        }
        return relinks
    }

    /// The stored links of `keys` (found by `condition` on `l` and `k`, the code's own SQL), by id.
    private static func links(
        _ c: Connection, where condition: String, of keys: [NewEvents.Key], dialect: SQLDialect
    ) throws -> [(NewEvents.Key, Row)] {
        try c.query(
            """
            SELECT l.app, l.anonymous_id, l.user_id, (extract(epoch FROM l.first_seen) * 1000000)::int8, l.person_id
            FROM unnest($1::text[], $2::text[]) AS k(app, id)
            CROSS JOIN LATERAL (SELECT * FROM identity_links l WHERE l.app = k.app AND \(condition) \(dialect.fence)) l
            """, NewEvents.Key.parameters(TouchedPersons.sorted(keys))
        ).rows.map { row in
            (NewEvents.Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1)),
             Row(link: IdentityLink(userId: try row.decode(String.self, at: 2), firstSeen: try row.decode(Int64.self, at: 3)),
                 storedPerson: try row.decode(String.self, at: 4)))
        }
    }

    /// The stored links of `apps`, by app and id: what a rebuild keeps once
    /// months are archived (`FrozenDays`).
    static func stored(_ c: Connection, apps: [String]) throws -> [String: [String: IdentityLink]] {
        var links: [String: [String: IdentityLink]] = [:]
        try c.forEachBinaryRow(
            "SELECT app, anonymous_id, user_id, first_seen FROM identity_links WHERE app = ANY($1::text[])", [.textArray(apps)],
            streaming: true
        ) { row in
            guard let firstSeen = try row.timestamp(3) else { return }
            links[try row.required(0, row.text), default: [:]][try row.required(1, row.text)] =
                IdentityLink(userId: try row.required(2, row.text), firstSeen: firstSeen)
        }
        return links
    }

    /// A rebuild's links for one app, from scratch: each (id, user id)
    /// pair's first sighting (a device's anonymous id on a message with a
    /// user id, or an alias's previous id) streams out unsorted (a hash
    /// aggregate: a pair's best observation is its earliest, so the winner
    /// over pairs is the winner over events) and the engine's
    /// `IdentityResolver` keeps each id's winner and finds its person. In
    /// SQL this would be a sort of every identified event, a large share of
    /// a rebuild's database time. A scan per app, though each scans the
    /// whole log: the next app's runs while the last one is evaluated, and
    /// one scan for every app, ahead of all evaluation, made a rebuild at
    /// 10 M events no faster (BENCHMARKS.md, "What limits the rebuild").
    /// Returns each linked id's person, for the history read that follows.
    /// Reads on `reads`, stores on `c` (the two may be one session).
    /// `keeping`: stored links that stand beside the log's (an archived
    /// month's evidence), each winning or losing as any sighting does.
    static func rebuild(
        reading reads: Connection, writing c: Connection, app: String, keeping: [String: IdentityLink] = [:]
    ) throws -> [String: String] {
        try ReadScope.bind(reads, app: app, paths: [])
        var links = keeping
        var fields: [String?] = []
        try reads.copyOut(
            """
            COPY (SELECT anonymous_id, user_id, min("timestamp") FROM events
                  WHERE app = \(ReadScope.app) AND anonymous_id IS NOT NULL AND user_id IS NOT NULL
                  GROUP BY anonymous_id, user_id
                  UNION ALL
                  SELECT previous_id, user_id, min("timestamp") FROM events
                  WHERE app = \(ReadScope.app) AND previous_id IS NOT NULL AND user_id IS NOT NULL
                  GROUP BY previous_id, user_id) TO STDOUT
            """
        ) { line in
            CopyText.fields(of: line, into: &fields)
            guard fields.count == 3, let time = fields[2], let timestamp = Timestamps.parse(time) else {
                throw PostgresError(.unexpectedResult, message: "unreadable identified event for app \(app): \(fields)")
            }
            IdentityResolver.record(IdentityObservation(anonymousId: fields[0], userId: fields[1], timestamp: timestamp), into: &links)
        }
        let persons = IdentityResolver.persons(of: links)
        try c.copyIn("COPY identity_links (app, anonymous_id, user_id, first_seen, person_id) FROM STDIN") { writer in
            for (id, link) in links {
                try writer.writeRow([.text(app), .text(id), .text(link.userId), .microseconds(link.firstSeen), .text(persons[id] ?? link.userId)])
            }
        }
        return persons
    }
}
