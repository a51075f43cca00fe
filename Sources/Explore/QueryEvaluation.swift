import Foundation
import Funnels
import LogReading

/// One query's pass over the store's columns: persons from the events'
/// identifiers (`IdentityResolver`'s rule, on numbers), each person's
/// events that can matter to the funnel handed to `FunnelEvaluator`, and
/// the outcomes counted by cohort day as the nightly job counts them.
struct QueryEvaluation {
    let query: FunnelQuery
    let snapshot: ColumnStore.Snapshot
    let deadline: Deadline?

    /// What the persons added up to, by cohort day.
    struct Counted: Sendable {
        var days: [String: FunnelTally] = [:]
        /// Each of the query's analyses' counts (in `FunnelQuery.analyses`' order), by cohort day.
        var analyses: [[String: any DayCounts]]
        /// The earliest a window open at the query's clock closes: until
        /// then, with no new events, the counts stay as they are.
        var validUntil: Int64?

        init(analyses: Int) {
            self.analyses = Array(repeating: [:], count: analyses)
        }

        init(days: [String: FunnelTally], analyses: [[String: any DayCounts]], validUntil: Int64?) {
            self.days = days
            self.analyses = analyses
            self.validUntil = validUntil
        }

        mutating func merge(_ other: Counted) {
            if let until = other.validUntil { validUntil = min(validUntil ?? until, until) }
            for (day, tally) in other.days {
                if days[day] == nil { days[day] = tally } else { days[day]?.merge(tally) }
            }
            for (index, counted) in other.analyses.enumerated() where index < analyses.count {
                for (day, counts) in counted { counts.merge(into: &analyses[index][day]) }
            }
        }
    }

    func run() throws -> Counted {
        let relevant = relevantNames()
        let (persons, personOfId) = try personOfEvents()
        let personCount = snapshot.idCount + 1
        let groups = query.funnel.aggregateBy == .group
        let (order, starts) = groups ? groupTimelines(persons) : personTimelines(persons)
        let owners = (0..<personCount).filter { starts[$0 + 1] > starts[$0] }
        let units = query.analyses.contains(where: \.listsPersons)
            ? Units(ids: try snapshot.ids(), columns: snapshot.columns, personOfId: personOfId, groups: groups) : nil

        let workers = max(1, min(ProcessInfo.processInfo.activeProcessorCount, owners.count / 256 + 1))
        let context = Context(
            query: query, snapshot: snapshot, order: order, starts: starts, relevant: relevant, units: units,
            audiences: try Membership(query, ids: { try snapshot.ids() }, count: personCount), deadline: deadline)
        let lanes = Background(threads: workers)
        defer { lanes.shutdown() }
        let parts = (0..<workers).map { worker in
            let range = owners.count * worker / workers..<owners.count * (worker + 1) / workers
            let persons = Array(owners[range])
            return lanes.run { try context.count(persons[...]) }
        }
        var counted = Counted(analyses: query.analyses.count)
        for part in parts { counted.merge(try part.wait()) }
        return counted
    }

    /// Every event grouped by person (a counting sort on the person's
    /// number): `order` lists event indexes, person by person, and person
    /// `p`'s are at `starts[p]..<starts[p + 1]`.
    private func personTimelines(_ persons: [UInt32]) -> (order: [Int32], starts: [Int32]) {
        let count = snapshot.columns.count, size = snapshot.idCount + 1
        var starts = [Int32](repeating: 0, count: size + 1)
        for index in 0..<count { starts[Int(persons[index]) + 1] += 1 }
        for person in 0..<size { starts[person + 1] += starts[person] }
        var order = [Int32](repeating: 0, count: count)
        var next = starts
        for index in 0..<count {
            let person = Int(persons[index])
            order[Int(next[person])] = Int32(index)
            next[person] += 1
        }
        return (order, starts)
    }

    /// Every event of each group's members grouped by group, as
    /// `personTimelines` groups by person: a person is a member of every
    /// group their `group` calls named, and all of their events, earlier
    /// ones too, count for each (docs/funnels.md, "Counting groups").
    private func groupTimelines(_ persons: [UInt32]) -> (order: [Int32], starts: [Int32]) {
        let columns = snapshot.columns, size = snapshot.idCount + 1
        let groupKind = UInt8(EventColumns.kinds.firstIndex(of: .group) ?? 0)
        // (person, group) pairs, each once.
        var memberships = Set<UInt64>()
        for index in 0..<columns.count where columns.kind[index] == groupKind && columns.group[index] != 0 && persons[index] != 0 {
            memberships.insert(UInt64(persons[index]) << 32 | UInt64(columns.group[index]))
        }
        // Each person's groups, by person number.
        var firstGroup = [Int32](repeating: 0, count: size + 1)
        for membership in memberships { firstGroup[Int(membership >> 32) + 1] += 1 }
        for person in 0..<size { firstGroup[person + 1] += firstGroup[person] }
        var groupsOf = [UInt32](repeating: 0, count: memberships.count)
        var nextGroup = firstGroup
        for membership in memberships {
            let person = Int(membership >> 32)
            groupsOf[Int(nextGroup[person])] = UInt32(truncatingIfNeeded: membership)
            nextGroup[person] += 1
        }
        // Each member's events, once per group of theirs, by group.
        var starts = [Int32](repeating: 0, count: size + 1)
        for index in 0..<columns.count {
            let person = Int(persons[index])
            for slot in Int(firstGroup[person])..<Int(firstGroup[person + 1]) { starts[Int(groupsOf[slot]) + 1] += 1 }
        }
        for group in 0..<size { starts[group + 1] += starts[group] }
        var order = [Int32](repeating: 0, count: Int(starts[size]))
        var next = starts
        for index in 0..<columns.count {
            let person = Int(persons[index])
            for slot in Int(firstGroup[person])..<Int(firstGroup[person + 1]) {
                let group = Int(groupsOf[slot])
                order[Int(next[group])] = Int32(index)
                next[group] += 1
            }
        }
        return (order, starts)
    }

    /// Per name number, a bit per event kind whose events of that name may
    /// change an outcome (`OutcomeEvents`); nil when every event counts: a
    /// strict order (any event between steps breaks a chain), or an analysis
    /// that reads every event (what persons did instead, any active event).
    private func relevantNames() -> [UInt8]? {
        let funnel = query.funnel
        guard funnel.order != .strict, !query.analyses.contains(where: \.readsEveryEvent) else { return nil }
        let outcomes = OutcomeEvents(funnels: [funnel])
        var bits = [UInt8](repeating: 0, count: snapshot.names.count + 1)
        for number in 1..<bits.count {
            let name = snapshot.names.string(UInt32(number))
            for (bit, kind) in EventColumns.kinds.enumerated() where outcomes.mayChangeOutcome(kind: kind, name: name) {
                bits[number] |= 1 << UInt8(bit)
            }
        }
        return bits
    }

    /// Each event's person, as a number into the identifier table, by
    /// `IdentityResolver`'s rule on numbers: every id is linked to the user
    /// it was first seen with (on a message with both, or as an alias's
    /// previous id; earliest, then the smallest user id:
    /// `IdentityLink.isPreferred`), and an event's id (its user, else its
    /// anonymous id) is followed link by link to an id with none; in a loop
    /// of links, the one seen last is not followed.
    /// Also returns each id's person (by id number; 0 for none).
    private func personOfEvents() throws -> (events: [UInt32], ids: [UInt32]) {
        let columns = snapshot.columns
        var ids: StringTable?
        func text(_ id: UInt32) throws -> String {
            if ids == nil { ids = try snapshot.ids() }
            return ids?.string(id) ?? ""
        }
        func link(_ id: Int) throws -> IdentityLink { IdentityLink(userId: try text(linked[id]), firstSeen: firstSeen[id]) }
        var linked = [UInt32](repeating: 0, count: snapshot.idCount + 1)
        var firstSeen = [Int64](repeating: .max, count: snapshot.idCount + 1)
        func observe(_ id: Int, _ user: UInt32, _ time: Int64) throws {
            if time < firstSeen[id] {
                firstSeen[id] = time
                linked[id] = user
            } else if time == firstSeen[id], user != linked[id],
                      // Two users of one id at one time: the smaller id, by its text.
                      IdentityLink(userId: try text(user), firstSeen: time).isPreferred(over: try link(id)) {
                linked[id] = user
            }
        }
        for index in 0..<columns.count {
            let user = columns.user[index]
            guard user != 0 else { continue }
            let time = columns.time[index]
            if columns.anonymous[index] != 0 { try observe(Int(columns.anonymous[index]), user, time) }
            if columns.previous[index] != 0 { try observe(Int(columns.previous[index]), user, time) }
        }
        // Where each id's links lead, each id walked once.
        var person = [UInt32](repeating: 0, count: linked.count)
        var walk = [UInt32](repeating: 0, count: linked.count)
        var path: [Int] = []
        for start in 1..<max(1, linked.count) where person[start] == 0 {
            path.removeAll(keepingCapacity: true)
            var current = start, found = UInt32(start)
            while true {
                if person[current] != 0 {
                    found = person[current]
                    break
                }
                let next = Int(linked[current])
                if next == 0 || next == current {
                    found = UInt32(current)
                    break
                }
                if walk[current] == UInt32(start), let loopStart = path.firstIndex(of: current) {
                    // A loop: its least preferred link is not followed.
                    var last = path[loopStart]
                    for id in path[loopStart...] {
                        if try link(last).isPreferred(over: link(id)) { last = id }
                    }
                    found = UInt32(last)
                    break
                }
                walk[current] = UInt32(start)
                path.append(current)
                current = next
            }
            for id in path { person[id] = found }
            if person[current] == 0 { person[current] = found }
        }
        var persons = [UInt32](repeating: 0, count: columns.count)
        for index in 0..<columns.count {
            let id = columns.user[index] != 0 ? columns.user[index] : columns.anonymous[index]
            persons[index] = id != 0 ? person[Int(id)] : 0
        }
        return (persons, person)
    }

    /// Who each person (or group) is, by number, for analyses that list
    /// persons: their id, and every id merged into them (an id seen as a
    /// user, anonymous or previous id whose links lead to them).
    struct Units: Sendable {
        let ids: StringTable
        let groups: Bool
        /// Person `p`'s other ids are `members[starts[p]..<starts[p + 1]]`.
        let starts: [Int32]
        let members: [UInt32]

        init(ids: StringTable, columns: EventColumns, personOfId: [UInt32], groups: Bool) {
            self.ids = ids
            self.groups = groups
            let size = personOfId.count
            var seen = [Bool](repeating: false, count: size)
            // Three columns read side by side, without an array per event.
            for column in [columns.user, columns.anonymous, columns.previous] {
                for id in column where Int(id) < size { seen[Int(id)] = true }
            }
            var starts = [Int32](repeating: 0, count: size + 1)
            for id in 1..<max(1, size) where seen[id] && Int(personOfId[id]) != id && Int(personOfId[id]) < size {
                starts[Int(personOfId[id]) + 1] += 1
            }
            for person in 0..<size { starts[person + 1] += starts[person] }
            var members = [UInt32](repeating: 0, count: Int(starts[size]))
            var next = starts
            for id in 1..<max(1, size) where seen[id] && Int(personOfId[id]) != id && Int(personOfId[id]) < size {
                let person = Int(personOfId[id])
                members[Int(next[person])] = UInt32(id)
                next[person] += 1
            }
            self.starts = starts
            self.members = members
        }

        func unit(_ number: Int) -> CountedUnit {
            let id = ids.string(UInt32(number)) ?? ""
            guard !groups, number + 1 < starts.count else { return CountedUnit(id: id, ids: [id]) }
            let others = members[Int(starts[number])..<Int(starts[number + 1])].compactMap { ids.string($0) }
            return CountedUnit(id: id, ids: [id] + others.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        }
    }

    /// Which of the query's audiences (`AudienceFilter`) each person (or
    /// group), by number, is in: a bit per audience, read once from the
    /// identifier table before the workers count.
    struct Membership: Sendable {
        let names: [String]
        let bits: [UInt64]
        /// The bits a person counted has all of, and none of.
        let required: UInt64
        let excluded: UInt64

        /// Nil when the query reads no audience.
        init?(_ query: FunnelQuery, ids: () throws -> StringTable, count: Int) throws {
            let filter = query.audiences
            let names = Array(filter.names(for: query.funnel).prefix(64))
            guard !names.isEmpty else { return nil }
            func mask(_ audiences: [String]) -> UInt64 {
                audiences.reduce(0) { mask, name in names.firstIndex(of: name).map { mask | 1 << UInt64($0) } ?? mask }
            }
            self.names = names
            required = mask(filter.within)
            excluded = mask(filter.outside)
            let table = try ids()
            let sets = names.map { filter.members[$0] ?? [] }
            var bits = [UInt64](repeating: 0, count: count)
            for number in 1..<max(1, min(count, table.count + 1)) {
                guard let id = table.string(UInt32(number)) else { continue }
                for (index, members) in sets.enumerated() where members.contains(id) { bits[number] |= 1 << UInt64(index) }
            }
            self.bits = bits
        }

        /// Whether person `number` passes the filter.
        func admits(_ number: Int) -> Bool {
            let mine = number < bits.count ? bits[number] : 0
            return mine & required == required && mine & excluded == 0
        }

        func isMember(_ number: Int, of audience: String) -> Bool {
            guard number < bits.count, let index = names.firstIndex(of: audience) else { return false }
            return bits[number] & (1 << UInt64(index)) != 0
        }
    }

    /// What a worker reads: the columns and the persons' events in `order`.
    private struct Context: Sendable {
        let query: FunnelQuery
        let snapshot: ColumnStore.Snapshot
        let order: [Int32]
        let starts: [Int32]
        /// `relevantNames()`: nil when every event goes to the engine.
        let relevant: [UInt8]?
        /// Who the persons are, when an analysis lists them.
        let units: Units?
        /// The audiences the query reads, nil when none.
        let audiences: Membership?
        let deadline: Deadline?

        func count(_ persons: ArraySlice<Int>) throws -> Counted {
            let funnel = query.funnel
            let zone = TimeZone(identifier: query.timeZone) ?? .gmt
            let shape = FunnelTally.Shape(funnel)
            let analyses = query.analyses
            let columns = snapshot.columns
            let paths = snapshot.paths.enumerated().compactMap { index, path in
                funnel.referencedPaths.contains(path) ? snapshot.values[index].map { (index, path, $0.strings) } : nil
            }
            let names = snapshot.names.strings
            var attributeCache = AttributeCache(columns: columns, paths: paths)
            func event(_ index: Int, attributes: inout AttributeCache) throws -> FunnelEvent {
                let name = columns.name[index]
                return FunnelEvent(
                    messageId: "", kind: EventColumns.kinds[Int(columns.kind[index])], name: name == 0 ? nil : names[Int(name) - 1],
                    timestamp: columns.time[index], attributes: try attributes.attributes(of: index))
            }
            // The breakdowns' columns, when a person's step events lacking one of them means reading all of theirs.
            let carried = relevant != nil && funnel.attribution == .firstStep
                ? funnel.breakdowns.compactMap { path in snapshot.paths.firstIndex(of: path).map { columns.attributes[$0] } } : []
            var counted = Counted(analyses: analyses.count)
            var events: [FunnelEvent] = []
            var positions: [Int] = []
            var dayText: [Int64: String] = [:]
            for (done, person) in persons.enumerated() {
                if done & 1023 == 0 { try deadline?.check() }
                events.removeAll(keepingCapacity: true)
                positions.removeAll(keepingCapacity: true)
                var lacking = false
                for position in Int(starts[person])..<Int(starts[person + 1]) {
                    let index = Int(order[position])
                    if let relevant, relevant[Int(columns.name[index])] & (1 << columns.kind[index]) == 0 { continue }
                    for column in carried where column[index] == 0 { lacking = true }
                    events.append(try event(index, attributes: &attributeCache))
                    positions.append(position)
                }
                guard !events.isEmpty else { continue }
                // By the first step's event, a dimension it lacks is taken from the next event in the
                // window that has it, whatever the event: then the engine sees all of the person's.
                if lacking {
                    events.removeAll(keepingCapacity: true)
                    positions.removeAll(keepingCapacity: true)
                    for position in Int(starts[person])..<Int(starts[person + 1]) {
                        events.append(try event(Int(order[position]), attributes: &attributeCache))
                        positions.append(position)
                    }
                }
                // The engine orders events of one time by their message ids: read them only for such a person.
                if hasTie(events) {
                    for (offset, position) in positions.enumerated() { events[offset].messageId = try columns.messageId(Int(order[position])) }
                }
                var outcome = FunnelEvaluator.evaluate(distinctEvents: events, funnel: funnel, now: query.now)
                if let until = outcome.openUntil { counted.validUntil = min(counted.validUntil ?? until, until) }
                guard outcome.level > 0 || outcome.excluded, let start = outcome.startTime else { continue }
                if let audiences {
                    guard audiences.admits(person) else { continue }
                    outcome.setAudienceBreakdowns(of: funnel) { audiences.isMember(person, of: $0) }
                }
                let dayNumber = CohortCalendar.dayNumber(of: start, in: zone)
                let day: String
                if let known = dayText[dayNumber] { day = known } else {
                    day = CohortCalendar.text(ofDay: dayNumber)
                    dayText[dayNumber] = day
                }
                guard query.includes(day) else { continue }
                // Not `[day, default: …]`: its closure would copy the funnel for every person.
                if counted.days[day] == nil { counted.days[day] = FunnelTally(funnel: funnel) }
                counted.days[day]?.add(outcome, shape: shape, cohortDay: day, timeZone: zone)
                for (index, analysis) in analyses.enumerated() {
                    analysis.count(
                        outcome, of: { units?.unit(person) ?? CountedUnit(id: "", ids: []) }, in: funnel, events: events,
                        into: &counted.analyses[index][day])
                }
            }
            // Each day's times sorted here, on the workers: merging and storing them then meets sorted runs.
            counted.days = counted.days.mapValues { $0.normalized() }
            return counted
        }

        private func hasTie(_ events: [FunnelEvent]) -> Bool {
            guard events.count > 1 else { return false }
            // Usually in time order already (the log's order): no sort needed to see no tie.
            if events.indices.dropFirst().allSatisfy({ events[$0 - 1].timestamp < events[$0].timestamp }) { return false }
            var times = events.map(\.timestamp)
            times.sort()
            return times.indices.dropFirst().contains { times[$0] == times[$0 - 1] }
        }
    }
}

/// Events' attributes as the engine takes them, one dictionary per
/// combination of values shared by every event with it: most events of a
/// person, and most persons, carry the same few, and a dictionary built per
/// event would be a large share of a query's time.
private struct AttributeCache {
    let columns: EventColumns
    let paths: [(index: Int, path: String, values: [String])]
    private var built: [[UInt32]: [String: String]] = [:]
    private var key: [UInt32]

    init(columns: EventColumns, paths: [(index: Int, path: String, values: [String])]) {
        self.columns = columns
        self.paths = paths
        key = Array(repeating: 0, count: paths.count)
    }

    mutating func attributes(of event: Int) throws -> [String: String] {
        guard !paths.isEmpty else { return [:] }
        for (position, path) in paths.enumerated() { key[position] = columns.attributes[path.index][event] }
        if let known = built[key] { return known }
        var attributes: [String: String] = [:]
        for (position, path) in paths.enumerated() where key[position] != 0 {
            let number = Int(key[position])
            guard number <= path.values.count else { throw ColumnStoreError.damaged("value \(number) of \(path.path)") }
            attributes[path.path] = path.values[number - 1]
        }
        built[key] = attributes
        return attributes
    }
}

extension QueryEvaluation.Counted {
    /// The report of what was counted, as `onramp report` builds it from the stored days.
    func report(_ query: FunnelQuery) -> (FunnelReport, [Double]) {
        let funnel = query.funnel
        let zone = TimeZone(identifier: query.timeZone) ?? .gmt
        let tally = FunnelTally.total(of: days.values, funnel: funnel)
        var report = FunnelReport(funnel: funnel, tally: tally, now: query.now, timeZone: zone)
        report.regressions = Regressions.find(funnel: funnel, days: days, now: query.now, timeZone: zone, to: query.to)
        for (index, analysis) in query.analyses.enumerated() where index < analyses.count {
            analysis.fill(&report, funnel: funnel, tally: tally, counted: analyses[index], now: query.now)
        }
        report.timeZone = query.timeZone
        return (report, tally.durations.map { Double($0) / 1_000_000 })
    }
}
