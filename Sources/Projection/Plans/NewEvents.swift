import Funnels
import LibPQ
import LogReading

/// An incremental run's new events, read from the log once, as identities:
/// how many each app has, the link each anonymous id shows among them, the
/// keys whose persons must be recomputed (user ids, and the anonymous ids of
/// anonymous events) for events that may change an outcome
/// (`OutcomeEvents`), and the other events, activity, by key.
///
/// Counting the new events, linking identities and finding the touched
/// persons in SQL would be three statements, each reading the day through
/// the BRIN range, two of them sorting it as text. Here the day streams out
/// once, unsorted, and is folded by hashing.
struct NewEvents: Sendable {
    struct Key: Hashable, Sendable {
        let app: String
        let id: String

        /// `keys` as the two parameters ($1, $2: apps, ids) a statement
        /// takes them in, `unnest($1::text[], $2::text[])`, in order.
        static func parameters(_ keys: some Collection<Key>) -> [PostgresValue] {
            [.textArray(keys.map(\.app)), .textArray(keys.map(\.id))]
        }
    }

    /// One event that cannot change an outcome, as retention reads it.
    struct Activity: Sendable {
        let timestamp: Int64
        let kind: EventKind
        let name: String?

        /// As the engine's matchers read it (activity is matched by kind and name only).
        var event: FunnelEvent { FunnelEvent(messageId: "", kind: kind, name: name, timestamp: timestamp) }
    }

    var counts: [String: Int] = [:]
    /// App -> id (an anonymous id, or an alias's previous id) -> its preferred link among the new events.
    var links: [String: [String: IdentityLink]] = [:]
    /// User ids on new events: each is a person.
    var users = Set<Key>()
    /// Anonymous ids of new events without a user id: each belongs to its linked user, or is a person.
    var anonymous = Set<Key>()
    /// Activity by user id, and by anonymous id for events without one.
    var userActivity: [Key: [Activity]] = [:]
    var anonymousActivity: [Key: [Activity]] = [:]
    /// Group calls of the apps with a funnel counting groups, by sender (its
    /// user id, else its anonymous id): group id -> calls.
    var groupCalls: [Key: [String: Int]] = [:]
    /// Groups whose membership of an audience a funnel is broken down by
    /// changed with the clock alone (`AudienceBreakdownChanges`; such persons are among `users`).
    var clockedGroups = Set<Key>()
    /// Apps with persons erased since the last run (`ErasedPersons`), who are among `users`.
    var erasedApps = Set<String>()
    /// The earliest and latest timestamp of the activity (nil without any):
    /// what narrows the stored outcomes it can matter to (`PersonActivity.Lookup`).
    var activitySpan: ClosedRange<Int64>?

    /// The keys with activity, each once: the user ids, and the anonymous
    /// ids as the persons they are when no link names a user, as most are.
    var activityKeys: [Key] {
        Array(userActivity.keys) + anonymousActivity.keys.filter { userActivity[$0] == nil }
    }

    /// Whether `key`'s stored outcomes are among those of `activityKeys`.
    func isActivityKey(_ key: Key) -> Bool { userActivity[key] != nil || anonymousActivity[key] != nil }

    /// Reads the events in `window` of the apps `outcomeEvents` has.
    /// In COPY's binary form: the day's read is the job's per-event work on
    /// both sides, and as text PostgreSQL printed every timestamp for the job
    /// to parse it back.
    static func read(_ c: Connection, outcomeEvents: [String: OutcomeEvents], window: LogWindow) throws -> NewEvents {
        try window.bind(c)
        var day = NewEvents()
        var row = BinaryCopyFields()
        // Each row's app is found among the configured ones by its bytes,
        // and counted and linked by position, not by three dictionary lookups
        // by a hashed string per event.
        let apps = outcomeEvents.sorted { $0.key < $1.key }
        let appBytes = apps.map { Array($0.key.utf8) }
        var counts = [Int](repeating: 0, count: apps.count)
        var links = [[String: IdentityLink]](repeating: [:], count: apps.count)
        var earliest = Int64.max, latest = Int64.min
        try c.copyOut(
            """
            COPY (SELECT e.app, e.anonymous_id, e.user_id, e."timestamp", e.type, e.event, e.previous_id, e.group_id FROM events e
                  WHERE \(LogWindow.condition)) TO STDOUT (FORMAT binary)
            """
        ) { message in
            guard try row.read(message) else { return }
            guard row.count == 8, let appField = row.bytes(0) else {
                throw PostgresError(.unexpectedResult, message: "unreadable new event: \(row.count) fields")
            }
            guard let index = appBytes.firstIndex(where: { $0.elementsEqual(appField) }) else { return }
            let (app, relevance) = apps[index]
            counts[index] += 1
            guard let timestamp = row.timestamp(3), let type = row.text(4), let kind = EventKind(rawValue: type) else {
                throw PostgresError(.unexpectedResult, message: "unreadable timestamp or type on a new event of \(app)")
            }
            let name = row.text(5)
            let outcome = relevance.mayChangeOutcome(kind: kind, name: name)
            let activity = outcome ? nil : Activity(timestamp: timestamp, kind: kind, name: name)
            if activity != nil {
                earliest = min(earliest, timestamp)
                latest = max(latest, timestamp)
            }
            if kind == .group, relevance.countsGroups, let group = row.text(7), let sender = row.text(2) ?? row.text(1) {
                day.groupCalls[Key(app: app, id: sender), default: [:]][group, default: 0] += 1
            }
            if let user = row.text(2) {
                let key = Key(app: app, id: user)
                if let activity { day.userActivity[key, default: []].append(activity) } else { day.users.insert(key) }
                if let anonymous = row.text(1) {
                    IdentityResolver.record(
                        IdentityObservation(anonymousId: anonymous, userId: user, timestamp: timestamp), into: &links[index])
                }
                if let previous = row.text(6) {
                    IdentityResolver.record(.alias(previousId: previous, userId: user, timestamp: timestamp), into: &links[index])
                }
            } else if let anonymous = row.text(1) {
                let key = Key(app: app, id: anonymous)
                if let activity { day.anonymousActivity[key, default: []].append(activity) } else { day.anonymous.insert(key) }
            }
        }
        for (index, (app, _)) in apps.enumerated() {
            if counts[index] > 0 { day.counts[app] = counts[index] }
            if !links[index].isEmpty { day.links[app] = links[index] }
        }
        if earliest <= latest { day.activitySpan = earliest...latest }
        return day
    }
}
