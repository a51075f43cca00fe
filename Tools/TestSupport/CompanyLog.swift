import Foundation
public import Funnels
public import LibPQ

/// A log of companies for funnels that count groups (docs/funnels.md,
/// "Counting groups").
public enum CompanyLog {
    static let day: Int64 = 86_400_000_000

    /// Companies of app ops: a creator who sets one up (screens, then a
    /// `group` call naming it) and employees who join it (a `group` call,
    /// then `welcome`), some a day or more later, some in two companies,
    /// some anonymous until an identify or a server-side alias.
    public static func events(seed: UInt64) -> [SeedEvent] {
        var rng = SplitMix(seed: seed)
        let base = (Timestamps.microseconds(Date()) / day - 8) * day
        var events: [SeedEvent] = []
        var n = 0
        func screen(_ name: String, anonymous: String?, user: String?, at t: Int64) {
            n += 1
            events.append(SeedEvent(app: "ops", type: "screen", messageId: "m\(n)", event: name, anonymousId: anonymous, userId: user, timestamp: t))
        }
        func group(_ company: String, anonymous: String?, user: String?, at t: Int64) {
            n += 1
            events.append(SeedEvent(app: "ops", type: "group", messageId: "m\(n)", anonymousId: anonymous, userId: user, timestamp: t, groupId: company))
        }
        for c in 0..<40 {
            let company = "co-\(c)"
            var t = base + Int64(rng.next() % 5) * day + Int64(rng.next() % 40_000) * 1_000_000
            let creator = "creator-\(c)"
            if rng.next() % 5 != 0 { screen("companySetup", anonymous: "d-\(creator)", user: nil, at: t) }
            t += 60_000_000
            if rng.next() % 6 != 0 {
                // Signed in by a message with both ids, or by a server-side alias.
                if c % 3 == 0 {
                    n += 1
                    events.append(SeedEvent(app: "ops", type: "alias", messageId: "m\(n)", userId: creator, timestamp: t, previousId: "d-\(creator)"))
                } else {
                    n += 1
                    events.append(SeedEvent(app: "ops", type: "identify", messageId: "m\(n)", anonymousId: "d-\(creator)", userId: creator, timestamp: t))
                }
                group(company, anonymous: nil, user: creator, at: t + 1_000_000)
            }
            for e in 0..<Int(rng.next() % 4) {
                let employee = "employee-\(c)-\(e)"
                // Within the day, or a day and more later (past the window).
                let joins = t + Int64(rng.next() % 2 == 0 ? rng.next() % 20_000 : 90_000 + rng.next() % 20_000) * 1_000_000
                group(company, anonymous: "d-\(employee)", user: employee, at: joins)
                screen("welcome", anonymous: "d-\(employee)", user: nil, at: joins + 5_000_000)
                if rng.next() % 5 == 0 { group("co-\((c + 1) % 40)", anonymous: "d-\(employee)", user: employee, at: joins + 9_000_000) }
            }
        }
        // Someone in no group: counted by persons, never by groups.
        screen("companySetup", anonymous: "loner", user: nil, at: base + day)
        screen("welcome", anonymous: "loner", user: nil, at: base + day + 1_000_000)
        return events
    }
}

extension CompanyLog {
    /// Companies that completed company setup and had an employee's first
    /// `welcome` within a day, counted by group.
    public static var funnel: Funnel {
        var funnel = Funnel(
            name: "companies", app: "ops", windowSeconds: 86_400,
            steps: [FunnelStep(.screen("companySetup", where: [:])), FunnelStep(.screen("welcome", where: [:]))], breakdowns: [])
        funnel.aggregateBy = .group
        return funnel
    }

    /// `window_funnel` over each group's members' events, members and
    /// persons as the analysts' views name them: group id -> level, for the
    /// groups of `funnel`'s app with any member's event. For funnels of
    /// screens with conditions on `properties.` paths, as the companies'
    /// funnels are; every value bound as a parameter.
    public static func referenceLevels(_ c: Connection, funnel: Funnel = CompanyLog.funnel) throws -> [String: Int] {
        var parameters: [PostgresValue] = [.text(funnel.app), .text("\(funnel.windowSeconds) seconds")]
        let conditions = funnel.steps.map { step -> String in
            let matcher = step.matchers[0]
            parameters.append(.text(matcher.name))
            var condition = "e.type = 'screen' AND e.event = $\(parameters.count)"
            for (path, value) in matcher.conditions.sorted(by: { $0.key < $1.key }) {
                parameters.append(.textArray(path.split(separator: ".").dropFirst().map(String.init)))
                parameters.append(.text(value))
                condition += " AND e.properties #>> $\(parameters.count - 1)::text[] = $\(parameters.count)"
            }
            return condition
        }
        var levels: [String: Int] = [:]
        for row in try c.query(
            """
            SELECT m.group_id, analytics.window_funnel($2::interval, e."timestamp", \(conditions.joined(separator: ", ")))
            FROM analytics.group_members m JOIN analytics.events e ON e.app = m.app AND e.person_id = m.person_id
            WHERE m.app = $1 GROUP BY m.group_id
            """, parameters
        ).rows {
            levels[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1)
        }
        return levels
    }
}
