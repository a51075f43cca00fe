import Funnels
import LibPQ
import LogReading

/// The groups an incremental run recomputes, for the funnels counting
/// groups (`GroupMembership`), beside the persons (`TouchedPersons`): found
/// from the day's identities as the persons are, on the run's session after
/// the links were updated.
enum TouchedGroups {
    typealias Key = NewEvents.Key

    /// What the day changes of the groups of `funnels` (those counting
    /// groups, `GroupMembership`): the groups to recompute (as units) —
    /// those of every person with a new event that may change an outcome or
    /// whose ids changed hands, those a person named for the first time,
    /// after an erasure every group of the app, those whose audience
    /// breakdown changed with the clock (`NewEvents.clockedGroups`), and those whose members'
    /// activity falls in a stored window —, per member of them the units it
    /// is read for, and the other groups' activity, their members'
    /// together, as a person's (`PersonActivity`).
    static func collect(
        _ c: Connection, day: NewEvents, relinks: [IdentityLinker.Relink], funnels: [Funnel], lookup: PersonActivity.Lookup
    ) throws -> (units: Set<Key>, members: [Key: [String]], activity: [PersonActivity]) {
        let apps = Set(funnels.map(\.app))
        guard !apps.isEmpty else { return ([], [:], []) }
        // The persons whose events may change a group's outcome, and each active person's activity.
        let changedIds = TouchedPersons.sorted(day.users.union(day.anonymous).filter { apps.contains($0.app) })
        var changed = Set<Key>()
        for (key, person) in zip(changedIds, try TouchedPersons.linkedPersons(c, of: changedIds, dialect: lookup.dialect)) {
            changed.insert(Key(app: key.app, id: person ?? key.id))
        }
        for relink in relinks where apps.contains(relink.app) {
            changed.insert(Key(app: relink.app, id: relink.person))
            changed.insert(Key(app: relink.app, id: relink.previousPerson))
        }
        var active: [Key: [NewEvents.Activity]] = [:]
        for events in [day.userActivity, day.anonymousActivity] {
            let ids = TouchedPersons.sorted(events.keys.filter { apps.contains($0.app) })
            for (key, person) in zip(ids, try TouchedPersons.linkedPersons(c, of: ids, dialect: lookup.dialect)) {
                active[Key(app: key.app, id: person ?? key.id), default: []] += events[key] ?? []
            }
        }
        // Each sender's calls tonight, by person: a group call is activity,
        // unless it is the person's first naming the group (all the calls
        // naming it are tonight's): then it makes them a member.
        let senders = TouchedPersons.sorted(day.groupCalls.keys.filter { apps.contains($0.app) })
        var calls: [Key: [String: Int]] = [:]
        for (key, person) in zip(senders, try TouchedPersons.linkedPersons(c, of: senders, dialect: lookup.dialect)) {
            for (group, count) in day.groupCalls[key] ?? [:] {
                calls[Key(app: key.app, id: person ?? key.id), default: [:]][group, default: 0] += count
            }
        }
        let groupsOf = try GroupMembership.groups(
            c, of: TouchedPersons.sorted(changed.union(active.keys).union(calls.keys)), dialect: lookup.dialect)
        var recomputed = try GroupMembership.every(c, of: funnels.filter { day.erasedApps.contains($0.app) })
        recomputed.formUnion(try GroupMembership.openWithoutEnd(c, of: funnels))
        recomputed.formUnion(day.clockedGroups.filter { apps.contains($0.app) })
        for person in changed { for group in (groupsOf[person] ?? [:]).keys { recomputed.insert(Key(app: person.app, id: group)) } }
        for (person, tonight) in calls {
            for (group, count) in tonight where (groupsOf[person]?[group] ?? 0) <= count {
                recomputed.insert(Key(app: person.app, id: group))
            }
        }
        // The other groups' activity, where they have stored rows it can matter to.
        var groupEvents: [Key: [NewEvents.Activity]] = [:]
        for (person, events) in active {
            for group in (groupsOf[person] ?? [:]).keys where !recomputed.contains(Key(app: person.app, id: group)) {
                groupEvents[Key(app: person.app, id: HistoryUnit.unit(of: group)), default: []] += events
            }
        }
        let (keys, byScan) = lookup.ordered(groupEvents.keys)
        var activity: [PersonActivity] = []
        for (unit, starts) in try PersonActivity.starts(c, of: keys[...], lookup: lookup, byScan: byScan) {
            guard let events = groupEvents[unit] else { continue }
            if PersonActivity.fallsInWindow(events, of: starts) {
                recomputed.insert(Key(app: unit.app, id: String(unit.id.dropFirst())))
            } else {
                activity.append(PersonActivity(app: unit.app, person: unit.id, events: events, starts: starts))
            }
        }
        let units = Set(recomputed.map { Key(app: $0.app, id: HistoryUnit.unit(of: $0.id)) })
        return (units, try GroupMembership.members(c, of: recomputed, dialect: lookup.dialect), activity)
    }
}
