import Funnels
import LibPQ

/// An incremental run's new events, read from the log once, as identities:
/// how many each app has, the link each anonymous id shows among them, and
/// the keys whose persons must be recomputed (user ids, and the anonymous ids
/// of anonymous events).
///
/// Counting the new events, linking identities and finding the touched
/// persons were three statements, each reading the day through the BRIN
/// range, two of them sorting it as text; at 10 M events, 2.2 s of a 10 s
/// run. Here the day streams out once, unsorted, and is folded by hashing.
struct NewEvents {
    struct Key: Hashable {
        let app: String
        let id: String
    }

    var counts: [String: Int] = [:]
    /// App -> anonymous id -> its preferred link among the new events.
    var links: [String: [String: IdentityLink]] = [:]
    /// User ids on new events: each is a person.
    var users = Set<Key>()
    /// Anonymous ids of new events without a user id: each belongs to its linked user, or is a person.
    var anonymous = Set<Key>()

    /// Reads the events of `apps` written after `checkpoint`.
    static func read(_ c: Connection, apps: Set<String>, since checkpoint: Checkpoint) throws -> NewEvents {
        try checkpoint.bind(c)
        var day = NewEvents()
        var fields: [String?] = []
        try c.copyOut(
            """
            COPY (SELECT e.app, e.anonymous_id, e.user_id, e."timestamp" FROM events e
                  WHERE \(Checkpoint.newEventsCondition)) TO STDOUT
            """
        ) { line in
            CopyText.fields(of: line, into: &fields)
            guard fields.count == 4, let app = fields[0] else {
                throw PostgresError(.unexpectedResult, message: "unreadable new event: \(fields)")
            }
            guard apps.contains(app) else { return }
            day.counts[app, default: 0] += 1
            if let user = fields[2] {
                day.users.insert(Key(app: app, id: user))
                guard let anonymous = fields[1] else { return }
                guard let time = fields[3], let timestamp = Timestamps.parse(time) else {
                    throw PostgresError(.unexpectedResult, message: "unreadable timestamp on a new event: \(fields)")
                }
                IdentityResolver.record(
                    IdentityObservation(anonymousId: anonymous, userId: user, timestamp: timestamp), into: &day.links[app, default: [:]])
            } else if let anonymous = fields[1] {
                day.anonymous.insert(Key(app: app, id: anonymous))
            }
        }
        return day
    }
}
