import Dispatch
import Foundation
import Funnels
import NIOConcurrencyHelpers

/// One query's pass over the store's columns: persons from the events'
/// identifiers (`IdentityResolver`'s rule, on numbers), each person's
/// events that can matter to the funnel handed to `FunnelEvaluator`, and
/// the outcomes counted by cohort day as the nightly job counts them.
struct QueryEvaluation {
    let query: FunnelQuery
    let snapshot: ColumnStore.Snapshot
    let deadline: DispatchTime?

    /// What the persons added up to, by cohort day.
    struct Counted: Sendable {
        var days: [String: FunnelTally] = [:]
        var dropOff = DropOffCounts()
        var retention: [String: RetentionCounts] = [:]

        mutating func merge(_ other: Counted) {
            for (day, tally) in other.days {
                if days[day] == nil { days[day] = tally } else { days[day]?.merge(tally) }
            }
            dropOff.merge(other.dropOff)
            for (day, counts) in other.retention { retention[day, default: RetentionCounts()].merge(counts) }
        }
    }

    func run() throws -> Counted {
        let columns = snapshot.columns
        let relevant = relevantNames()
        let everything = relevant == nil
        let persons = personOfEvents()

        // The events that can matter, grouped by person (a counting sort on the person's number).
        let personCount = snapshot.tables.ids.count + 1
        var starts = [Int32](repeating: 0, count: personCount + 1)
        var selected: [Int32] = []
        selected.reserveCapacity(everything ? columns.count : columns.count / 4)
        for index in 0..<columns.count where everything || (relevant?[Int(columns.name[index])] ?? 0) & (1 << columns.kind[index]) != 0 {
            selected.append(Int32(index))
            starts[Int(persons[index]) + 1] += 1
        }
        for person in 0..<personCount { starts[person + 1] += starts[person] }
        var order = [Int32](repeating: 0, count: selected.count)
        var next = starts
        for index in selected {
            let person = Int(persons[Int(index)])
            order[Int(next[person])] = index
            next[person] += 1
        }
        let owners = (0..<personCount).filter { starts[$0 + 1] > starts[$0] }

        let workers = max(1, min(ProcessInfo.processInfo.activeProcessorCount, owners.count / 256 + 1))
        let results = NIOLockedValueBox([Result<Counted, any Error>]())
        let context = Context(query: query, snapshot: snapshot, order: order, starts: starts)
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            let range = owners.count * worker / workers..<owners.count * (worker + 1) / workers
            let result = Result { try context.count(owners[range], deadline: deadline) }
            results.withLockedValue { $0.append(result) }
        }
        var counted = Counted()
        for result in results.withLockedValue({ $0 }) { counted.merge(try result.get()) }
        return counted
    }

    /// Per name number, a bit per event kind whose events of that name may
    /// change an outcome (`OutcomeEvents`); nil when every event counts: a
    /// strict order (any event between steps breaks a chain), diagnostics
    /// (what persons did instead) and retention (any active event).
    private func relevantNames() -> [UInt8]? {
        let funnel = query.funnel
        guard funnel.order != .strict, !query.diagnostics, !query.retention else { return nil }
        let outcomes = OutcomeEvents(funnels: [funnel])
        var bits = [UInt8](repeating: 0, count: snapshot.tables.names.count + 1)
        for number in 1..<bits.count {
            let name = snapshot.tables.names.string(UInt32(number))
            for (bit, kind) in EventColumns.kinds.enumerated() where outcomes.mayChangeOutcome(kind: kind, name: name) {
                bits[number] |= 1 << UInt8(bit)
            }
        }
        return bits
    }

    /// Each event's person, as a number into the identifier table: its user;
    /// else the user its anonymous id was first seen with (earliest, then
    /// the smallest user id: `IdentityLink.isPreferred`); else the anonymous id.
    private func personOfEvents() -> [UInt32] {
        let columns = snapshot.columns
        let ids = snapshot.tables.ids
        var linkedUser = [UInt32](repeating: 0, count: ids.count + 1)
        var firstSeen = [Int64](repeating: .max, count: ids.count + 1)
        for index in 0..<columns.count {
            let anonymous = Int(columns.anonymous[index]), user = columns.user[index]
            guard anonymous != 0, user != 0 else { continue }
            let time = columns.time[index]
            if time < firstSeen[anonymous] {
                firstSeen[anonymous] = time
                linkedUser[anonymous] = user
            } else if time == firstSeen[anonymous], user != linkedUser[anonymous],
                      let candidate = ids.string(user), let current = ids.string(linkedUser[anonymous]),
                      IdentityLink(userId: candidate, firstSeen: time).isPreferred(over: IdentityLink(userId: current, firstSeen: time)) {
                linkedUser[anonymous] = user
            }
        }
        var persons = [UInt32](repeating: 0, count: columns.count)
        for index in 0..<columns.count {
            let user = columns.user[index]
            if user != 0 {
                persons[index] = user
            } else {
                let anonymous = columns.anonymous[index]
                let linked = linkedUser[Int(anonymous)]
                persons[index] = linked != 0 ? linked : anonymous
            }
        }
        return persons
    }

    /// What a worker reads: the columns and the persons' events in `order`.
    private struct Context: Sendable {
        let query: FunnelQuery
        let snapshot: ColumnStore.Snapshot
        let order: [Int32]
        let starts: [Int32]

        func count(_ persons: ArraySlice<Int>, deadline: DispatchTime?) throws -> Counted {
            let funnel = query.funnel
            let zone = TimeZone(identifier: query.timeZone) ?? .gmt
            let shape = FunnelTally.Shape(funnel)
            let dropOffShape = DropOffFacts.Shape(funnel)
            let columns = snapshot.columns
            let tables = snapshot.tables
            let paths = snapshot.paths.enumerated().filter { funnel.referencedPaths.contains($0.element) }
            let names = tables.names.strings
            var counted = Counted()
            var events: [FunnelEvent] = []
            var dayText: [Int64: String] = [:]
            for (done, person) in persons.enumerated() {
                if done & 1023 == 0, let deadline, DispatchTime.now() > deadline {
                    throw ExploreError.timedOut(Double(deadline.uptimeNanoseconds) / 1e9)
                }
                events.removeAll(keepingCapacity: true)
                let range = Int(starts[person])..<Int(starts[person + 1])
                for position in range {
                    let index = Int(order[position])
                    let name = columns.name[index]
                    var attributes: [String: String] = [:]
                    for (path, key) in paths {
                        let value = columns.attributes[path][index]
                        if value != 0 { attributes[key] = tables.values[path].strings[Int(value) - 1] }
                    }
                    events.append(FunnelEvent(
                        messageId: "", kind: EventColumns.kinds[Int(columns.kind[index])],
                        name: name == 0 ? nil : names[Int(name) - 1], timestamp: columns.time[index], attributes: attributes))
                }
                // The engine orders events of one time by their message ids: read them only for such a person.
                if hasTie(events) {
                    for (offset, position) in range.enumerated() { events[offset].messageId = try columns.messageId(Int(order[position])) }
                }
                let outcome = FunnelEvaluator.evaluate(distinctEvents: events, funnel: funnel, now: query.now)
                guard outcome.level > 0 || outcome.excluded, let start = outcome.startTime else { continue }
                let dayNumber = CohortCalendar.dayNumber(of: start, in: zone)
                let day: String
                if let known = dayText[dayNumber] { day = known } else {
                    day = CohortCalendar.text(ofDay: dayNumber)
                    dayText[dayNumber] = day
                }
                guard query.includes(day) else { continue }
                counted.days[day, default: FunnelTally(funnel: funnel)].add(outcome, shape: shape, cohortDay: day, timeZone: zone)
                if query.diagnostics, let facts = DropOffFacts.of(outcome, in: funnel, shape: dropOffShape, events: events) {
                    counted.dropOff.add(outcome, facts: facts, required: dropOffShape.required)
                }
                if query.retention, outcome.level >= 1, !outcome.excluded, outcome.windowClosed {
                    counted.retention[day, default: RetentionCounts()].add(
                        start: start, completed: outcome.completed, retainedDays: funnel.retention.retainedDays(start: start, events: events))
                }
            }
            return counted
        }

        private func hasTie(_ events: [FunnelEvent]) -> Bool {
            guard events.count > 1 else { return false }
            var times = events.map(\.timestamp)
            times.sort()
            return times.indices.dropFirst().contains { times[$0] == times[$0 - 1] }
        }
    }
}

extension QueryEvaluation.Counted {
    /// The report of what was counted, as `onramp report` builds it from the stored days.
    func report(_ query: FunnelQuery) -> (FunnelReport, [Double]) {
        let funnel = query.funnel
        let zone = TimeZone(identifier: query.timeZone) ?? .gmt
        var tally = FunnelTally(funnel: funnel)
        for day in days.values { tally.merge(day) }
        tally = tally.normalized()
        var report = FunnelReport(funnel: funnel, tally: tally, now: query.now, timeZone: zone)
        let closed = CohortCalendar.newestClosedDay(now: query.now, windowMicroseconds: funnel.windowMicroseconds, in: zone)
        report.regressions = Regressions.find(
            funnel: funnel, days: days, newestClosedDay: min(closed, query.to.flatMap(CohortCalendar.dayNumber(ofText:)) ?? closed))
        if query.diagnostics { report.diagnostics = DropOffDiagnostics(funnel: funnel, tally: tally, counts: dropOff) }
        if query.retention {
            report.retention = RetentionReport(days: funnel.retention.days, cells: retention.mapValues { $0.cells(days: funnel.retention.days, now: query.now) })
        }
        report.timeZone = query.timeZone
        return (report, tally.durations.map { Double($0) / 1_000_000 })
    }
}
