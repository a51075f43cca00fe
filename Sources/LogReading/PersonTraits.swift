public import Funnels
public import LibPQ

/// The latest traits of listed persons (`--traits` on a list of persons):
/// per path, the value of the latest identify call, sent with any of the
/// person's ids, that set it; for a group, of its latest group call (its
/// name is `traits.name`), and `members`: who sent group calls naming it,
/// as of the last nightly run. Read through `analytics`, so a login reads
/// only its apps' traits.
public enum PersonTraits {
    /// Persons (or groups) read per statement.
    static let batch = 500
    /// For a group: the persons who sent group calls naming it, a "path" of their own.
    public static let members = "members"

    /// Per listed person's id, path as asked -> value. A path is read under
    /// `traits`, written with the prefix or without (`traits.plan`, `plan`).
    public static func read(_ c: Connection, app: String, persons: [ListedPerson], paths: [String], groups: Bool) throws -> [String: [String: String]] {
        guard !paths.isEmpty, !persons.isEmpty else { return [:] }
        let traits = groups ? paths.filter { $0 != Self.members } : paths
        let parts = traits.map { path in path.hasPrefix("traits.") ? String(path.dropFirst(7)) : path }
        var found: [String: [String: String]] = [:]
        for start in stride(from: 0, to: persons.count, by: batch) {
            let slice = persons[start..<min(start + batch, persons.count)]
            if groups, paths.contains(Self.members) {
                try c.forEachRow(
                    """
                    SELECT group_id, string_agg(person_id, ' ' ORDER BY person_id COLLATE "C") FROM analytics.group_members
                    WHERE app = $1 AND group_id = ANY ($2::text[]) GROUP BY group_id
                    """, [.text(app), .textArray(slice.map(\.id))]
                ) { row in
                    if let group = row.text(at: 0) { found[group, default: [:]][Self.members] = row.text(at: 1) }
                }
            }
            guard !traits.isEmpty else { continue }
            let owners = slice.flatMap { person in Array(repeating: person.id, count: person.ids.count) }
            let ids = slice.flatMap(\.ids)
            let sender = groups
                ? "e.type = 'group' AND e.group_id = i.id"
                : "e.type = 'identify' AND (e.user_id = i.id OR (e.user_id IS NULL AND e.anonymous_id = i.id))"
            try c.forEachRow(
                """
                SELECT DISTINCT ON (i.owner, p.n) i.owner, p.n, e.traits #>> string_to_array(p.part, '.')
                FROM unnest($2::text[], $3::text[]) AS i(owner, id)
                JOIN analytics.event_log e ON e.app = $1 AND \(sender)
                CROSS JOIN unnest($4::text[]) WITH ORDINALITY AS p(part, n)
                WHERE e.traits #>> string_to_array(p.part, '.') IS NOT NULL
                ORDER BY i.owner, p.n, e."timestamp" DESC, e.message_id DESC
                """, [.text(app), .textArray(owners), .textArray(ids), .textArray(parts)]
            ) { row in
                guard let owner = row.text(at: 0), let n = Int(row.text(at: 1) ?? ""), traits.indices.contains(n - 1) else { return }
                found[owner, default: [:]][traits[n - 1]] = row.text(at: 2)
            }
        }
        return found
    }
}
