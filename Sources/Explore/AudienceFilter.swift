import Funnels
import LibPQ

/// The audiences a query-time funnel reads (docs/explore.md): those its
/// persons must be in (`--audience`) or must not be in (`--not-audience`),
/// and those it is broken down by (`audience:NAME`). Their members are the
/// ones the nightly job last kept (`analytics.audience_members`, so only
/// the granted apps'), read in the query's own snapshot.
public struct AudienceFilter: Sendable, Hashable {
    /// Audiences every person counted is in.
    public var within: [String] = []
    /// Audiences no person counted is in.
    public var outside: [String] = []
    /// Each audience's members, as the store names them (a person's id, a group's id); set by `load`.
    private(set) var members: [String: Set<String>] = [:]

    public init(within: [String] = [], outside: [String] = []) {
        self.within = within
        self.outside = outside
    }

    /// Every audience `funnel` reads through this filter and its breakdowns, each once, in order.
    func names(for funnel: Funnel) -> [String] {
        var seen = Set<String>()
        return (within + outside + funnel.audienceBreakdowns).filter { seen.insert($0).inserted }
    }

    /// What the answer depends on: the audiences asked and their members
    /// now (an answer counted before is reused only for the same members: `AnswerCache`).
    var fingerprint: String {
        guard !members.isEmpty || !within.isEmpty || !outside.isEmpty else { return "" }
        // Order-free: each member's hash, added up.
        var sum: UInt64 = 0
        for (name, units) in members {
            sum &+= FNV1a.hash(name) &* UInt64(units.count + 1)
            for unit in units { sum &+= FNV1a.hash(name + "\u{1E}" + unit) }
        }
        return within.joined(separator: ",") + "|" + outside.joined(separator: ",") + "|" + String(sum, radix: 16)
    }

    /// Reads the members of every audience `funnel` reads, on `c` (in the
    /// query's transaction); an audience the login cannot see, of another
    /// app, or holding other units than the funnel counts is refused.
    mutating func load(_ c: Connection, funnel: Funnel) throws {
        let names = names(for: funnel)
        members = [:]
        guard !names.isEmpty else { return }
        var units: [String: String] = [:]
        for row in try c.query(
            """
            SELECT a.audience, a.unit, coalesce(m.person_id, m.group_id)
            FROM analytics.audiences a LEFT JOIN analytics.audience_members m ON m.audience = a.audience
            WHERE a.app = $1 AND a.audience = ANY($2::text[])
            """, [.text(funnel.app), .textArray(names)]
        ).rows {
            let name = try row.decode(String.self, at: 0)
            units[name] = try row.decode(String.self, at: 1)
            // An audience without members has one row, its id null.
            if let member = try row.decode(String?.self, at: 2) { members[name, default: []].insert(member) } else if members[name] == nil { members[name] = [] }
        }
        for name in names {
            guard let unit = units[name] else { throw ExploreError.unknownAudience(name, app: funnel.app) }
            guard unit == funnel.aggregateBy.rawValue else {
                throw ExploreError.audienceUnit(name, holds: unit, counts: funnel.aggregateBy.rawValue)
            }
        }
    }
}
