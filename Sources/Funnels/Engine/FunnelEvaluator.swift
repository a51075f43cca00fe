/// Computes one person's `PersonOutcome` from their events (docs/funnels.md).
///
/// Reach follows ClickHouse `windowFunnel`: the largest k such that distinct
/// events e1..ek match required steps 1..k with t1 ≤ … ≤ tk and
/// tk − t1 ≤ window (inclusive), over every start. Instead of enumerating
/// chains it keeps, per required step, the chain reaching that step with the
/// latest start: a later start dominates because it leaves more of the window
/// for later steps. Events are swept in time order, one timestamp at a time;
/// events sharing a timestamp may fill consecutive steps in any order, which
/// is a small bipartite matching (steps × same-time events), so equal
/// timestamps never cause a false drop-off and one event never fills two steps.
/// Cost: O(n · steps) for distinct timestamps, O(n · steps² + groups) overall.
public enum FunnelEvaluator {
    public static func evaluate(events: [FunnelEvent], funnel: Funnel, now: Int64) -> PersonOutcome {
        evaluate(events: events, distinct: false, funnel: funnel, now: now)
    }

    /// The same, for a caller whose events are already distinct by
    /// `messageId` — the nightly job, reading a log whose ledger stores each
    /// message id once per app — so the per-funnel deduplication, hashing
    /// every id, is skipped.
    public static func evaluate(distinctEvents events: [FunnelEvent], funnel: Funnel, now: Int64) -> PersonOutcome {
        evaluate(events: events, distinct: true, funnel: funnel, now: now)
    }

    private static func evaluate(events: [FunnelEvent], distinct: Bool, funnel: Funnel, now: Int64) -> PersonOutcome {
        let required = funnel.requiredStepIndices
        let window = funnel.windowMicroseconds
        let timeline = Timeline(events: events, distinct: distinct, funnel: funnel)
        let firstReach = funnel.isPlainWindowFunnel
            ? ChainSweep.run(timeline: timeline, stepCount: required.count, window: window).firstReach
            : ChainSearch(timeline: timeline, funnel: funnel).firstReach()

        let level = firstReach.lastIndex { $0 != nil }.map { $0 + 1 } ?? 0
        let chain = level > 0 ? firstReach[level - 1] : nil
        let completed = level > 0 && level == required.count
        let chainTimes = chain.map { $0.events.map { timeline.events[$0].timestamp } } ?? []

        var stepTimes = [Int64?](repeating: nil, count: funnel.steps.count)
        for (position, time) in chainTimes.enumerated() {
            stepTimes[required[position]] = time
        }

        var optionalDone = Set<Int>()
        /// Optional step (position in `steps`) -> the event that did it, for attribution.
        var optionalEvents: [Int: Int] = [:]
        if let chain {
            // With `hold`, an optional step's event shares the chain's held values too.
            let held = funnel.hold.isEmpty ? nil : chain.events.first.flatMap { ChainSearch.heldValues(timeline.events[$0], paths: funnel.hold) }
            let used = Set(chain.events)
            for stepIndex in funnel.steps.indices where funnel.steps[stepIndex].isOptional {
                // `next` = position (among required steps) of the first required step after it.
                let next = required.firstIndex { $0 > stepIndex } ?? required.count
                guard next > 0, next < chainTimes.count else { continue }
                let lower = chainTimes[next - 1], upper = chainTimes[next]
                let done = timeline.events.indices.first { index in
                    let event = timeline.events[index]
                    return !used.contains(index) && event.timestamp >= lower && event.timestamp <= upper
                        && funnel.steps[stepIndex].matches(event)
                        && (funnel.hold.isEmpty || ChainSearch.heldValues(event, paths: funnel.hold) == held)
                }
                if let done {
                    optionalDone.insert(stepIndex)
                    stepTimes[stepIndex] = timeline.events[done].timestamp
                    optionalEvents[stepIndex] = done
                }
            }
        }

        var excluded = false
        if let chain, let last = chainTimes.last, !funnel.exclusions.isEmpty {
            excluded = funnel.exclusions.contains { exclusion in
                // Between two chosen steps: from the first's time (when reached) to the second's, or the last reached.
                var lower = chain.start, upper = last
                if let between = exclusion.between {
                    guard let from = required.firstIndex(of: between.lowerBound), from < chainTimes.count else { return false }
                    let to = required.firstIndex(of: between.upperBound) ?? required.count - 1
                    lower = chainTimes[from]
                    upper = chainTimes[min(to, chainTimes.count - 1)]
                }
                return timeline.events.contains { event in
                    event.timestamp >= lower && event.timestamp <= upper && exclusion.matcher.matches(event)
                }
            }
        }

        let firstStart = timeline.events.indices.first { timeline.startsFunnel($0) }
        // Open windows: the latest step-1 event's is the last to close.
        let lastStart = timeline.events.indices.last { timeline.startsFunnel($0) }.map { timeline.events[$0].timestamp }
        let inProgress = !completed && lastStart.map { windowIsOpen(start: $0, window: window, now: now) } == true
        let openUntil: Int64?
        if inProgress {
            openUntil = lastStart.flatMap { windowEnd(start: $0, window: window) }
        } else if completed, let start = chain?.start, windowIsOpen(start: start, window: window, now: now) {
            // The chain's window (docs/funnels.md: t_1 + window).
            openUntil = windowEnd(start: start, window: window)
        } else {
            openUntil = nil
        }

        return PersonOutcome(
            level: level,
            completed: completed,
            inProgress: inProgress,
            excluded: excluded,
            startTime: firstStart.map { timeline.events[$0].timestamp },
            chainStartTime: chain?.start,
            completionTime: completed ? chainTimes.last : nil,
            stepTimes: stepTimes,
            optionalStepsDone: optionalDone,
            breakdown: breakdownValues(
                timeline: timeline, funnel: funnel, firstStart: firstStart,
                attributed: attributedEvent(funnel, chain: chain, optionalEvents: optionalEvents)),
            openUntil: openUntil
        )
    }

    /// `start + window`, or nil when that overflows: a window that never closes.
    static func windowEnd(start: Int64, window: Int64) -> Int64? {
        let (end, overflow) = start.addingReportingOverflow(window)
        return overflow ? nil : end
    }

    /// `start + window > now`, without overflow.
    static func windowIsOpen(start: Int64, window: Int64, now: Int64) -> Bool {
        windowEnd(start: start, window: window).map { $0 > now } ?? true
    }

    /// The event whose values a person's breakdowns take under the funnel's
    /// attribution other than the first step's: the last reached step's, or
    /// a chosen step's (nil when not reached); `.none` for the first step's rule.
    private static func attributedEvent(_ funnel: Funnel, chain: Chain?, optionalEvents: [Int: Int]) -> Int?? {
        switch funnel.attribution {
        case .firstStep: return .none
        case .lastStep: return .some(chain?.events.last)
        case .step(let index):
            guard let position = funnel.requiredStepIndices.firstIndex(of: index) else { return .some(optionalEvents[index]) }
            return .some(chain.flatMap { position < $0.events.count ? $0.events[position] : nil })
        }
    }

    /// Under `first_step` attribution, values come from the first step-1
    /// event; a dimension it lacks (e.g. `properties.auth_method`, known
    /// only after signup) is taken from the earliest later event within that
    /// event's window that carries it, else `(none)`. Within the window: a
    /// value is the person's as at their start, and the nightly job can then
    /// leave persons alone whose new events (everyday use of the app) all
    /// fall past their windows. Under `last_step` or `{step: N}`, they are
    /// that step's event's values, `(none)` where it has none or was not reached.
    private static func breakdownValues(timeline: Timeline, funnel: Funnel, firstStart: Int?, attributed: Int??) -> [String: String] {
        let dimensions = funnel.breakdowns
        var values: [String: String] = [:]
        values.reserveCapacity(dimensions.count)
        let events = timeline.events
        if case .some(let index) = attributed {
            // An audience's value is set by whoever knows its members (`AudienceBreakdown`).
            for dimension in dimensions where !dimension.hasPrefix(AudienceBreakdown.prefix) {
                values[dimension] = index.flatMap { events[$0].attributes[dimension] } ?? PersonOutcome.missingBreakdownValue
            }
            return values
        }
        let end = firstStart.flatMap { windowEnd(start: events[$0].timestamp, window: funnel.windowMicroseconds) } ?? Int64.max
        for dimension in dimensions where !dimension.hasPrefix(AudienceBreakdown.prefix) {
            var value: String?
            if let firstStart {
                for index in firstStart..<events.count {
                    guard events[index].timestamp <= end else { break }  // sorted by time
                    if let found = events[index].attributes[dimension] {
                        value = found
                        break
                    }
                }
            }
            values[dimension] = value ?? PersonOutcome.missingBreakdownValue
        }
        return values
    }
}

/// A person's events deduplicated by `messageId` and sorted by time, with the
/// required steps each event can fill.
struct Timeline {
    let events: [FunnelEvent]
    /// Ascending positions among the required steps that each event matches,
    /// flat: event i's are `positions[offsets[i]..<offsets[i + 1]]`. One
    /// array for the person instead of one per event, which the evaluator
    /// would otherwise allocate for every event of every person and funnel.
    private let positions: [Int]
    private let offsets: [Int]

    /// The required-step positions event `index` matches, ascending.
    func matches(_ index: Int) -> ArraySlice<Int> {
        positions[offsets[index]..<offsets[index + 1]]
    }

    /// Whether event `index` can fill step 1.
    func startsFunnel(_ index: Int) -> Bool {
        offsets[index] < offsets[index + 1] && positions[offsets[index]] == 0
    }

    init(events input: [FunnelEvent], distinct: Bool = false, funnel: Funnel) {
        var unique: [FunnelEvent] = []
        if distinct {
            unique = input
        } else {
            var firstIndex: [String: Int] = [:]
            for event in input {
                if let index = firstIndex[event.messageId] {
                    // A retry that carries an earlier time wins, so reprocessing is order-independent.
                    if event.timestamp < unique[index].timestamp { unique[index] = event }
                } else {
                    firstIndex[event.messageId] = unique.count
                    unique.append(event)
                }
            }
        }
        var positions: [Int] = []
        var offsets: [Int] = [0]
        offsets.reserveCapacity(unique.count + 1)
        let byName = funnel.requiredMatchers
        let hold = funnel.hold
        for index in unique.indices {
            // With `hold`, a step event lacking a held path can be on no chain.
            if let name = unique[index].name, let candidates = byName[name], hold.isEmpty || Self.carries(unique[index], hold) {
                var last = -1
                for candidate in candidates where candidate.position != last && candidate.matcher.matches(unique[index]) {
                    positions.append(candidate.position)
                    last = candidate.position
                }
            }
            offsets.append(positions.count)
        }
        // A log read in the order it was written is usually in time order
        // already, with no ties to break: then there is nothing to sort.
        if unique.indices.dropFirst().allSatisfy({ unique[$0 - 1].timestamp < unique[$0].timestamp }) {
            events = unique
            self.positions = positions
            self.offsets = offsets
            return
        }
        // Ties broken by step order, then messageId, for deterministic outputs.
        let firstStep = unique.indices.map { offsets[$0] < offsets[$0 + 1] ? positions[offsets[$0]] : Int.max }
        let order = unique.indices.sorted { a, b in
            if unique[a].timestamp != unique[b].timestamp { return unique[a].timestamp < unique[b].timestamp }
            if firstStep[a] != firstStep[b] { return firstStep[a] < firstStep[b] }
            return unique[a].messageId < unique[b].messageId
        }
        events = order.map { unique[$0] }
        var sortedPositions: [Int] = []
        sortedPositions.reserveCapacity(positions.count)
        var sortedOffsets: [Int] = [0]
        sortedOffsets.reserveCapacity(offsets.count)
        for index in order {
            sortedPositions += positions[offsets[index]..<offsets[index + 1]]
            sortedOffsets.append(sortedPositions.count)
        }
        self.positions = sortedPositions
        self.offsets = sortedOffsets
    }
}

extension Timeline {
    /// Whether `event` has a value at every held path. Out of line: a plain
    /// funnel never calls it, and inside the loop it would keep the matchers
    /// from being inlined there.
    @inline(never)
    static func carries(_ event: FunnelEvent, _ paths: [String]) -> Bool {
        paths.allSatisfy { event.attributes[$0] != nil }
    }
}

/// A chain of distinct events filling required steps 0..<events.count.
struct Chain: Hashable {
    /// t1: timestamp of the first event.
    var start: Int64
    /// Indices into `Timeline.events`, one per required step, in step order.
    var events: [Int]
}

/// The dynamic programme over time-ordered groups of equal timestamps.
struct ChainSweep {
    /// Per required step, the chain that first reached it (earliest tk) with
    /// the latest start among chains reaching it at that time.
    var firstReach: [Chain?]

    static func run(timeline: Timeline, stepCount: Int, window: Int64) -> ChainSweep {
        var best = [Chain?](repeating: nil, count: stepCount)
        var firstReach = [Chain?](repeating: nil, count: stepCount)
        var groupStart = 0
        let events = timeline.events
        while groupStart < events.count {
            var groupEnd = groupStart + 1
            while groupEnd < events.count && events[groupEnd].timestamp == events[groupStart].timestamp {
                groupEnd += 1
            }
            if groupEnd == groupStart + 1 {
                // The usual case, an event alone at its time: it can fill one step of one chain.
                if !timeline.matches(groupStart).isEmpty {
                    extend(&best, single: groupStart, timeline: timeline, time: events[groupStart].timestamp, window: window)
                    for step in 0..<stepCount where firstReach[step] == nil {
                        firstReach[step] = best[step]
                    }
                }
                groupStart = groupEnd
                continue
            }
            let group = Array(groupStart..<groupEnd).filter { !timeline.matches($0).isEmpty }
            if !group.isEmpty {
                extend(&best, group: group, timeline: timeline, time: events[groupStart].timestamp, window: window)
                for step in 0..<stepCount where firstReach[step] == nil {
                    firstReach[step] = best[step]
                }
            }
            groupStart = groupEnd
        }
        return ChainSweep(firstReach: firstReach)
    }

    /// Extends the best chains with one group of same-time events: a chain
    /// may enter the group at any step `entry` (from the best chain reaching
    /// `entry − 1` before the group, if still within the window, or as a new
    /// start when `entry` is step 0) and fill steps entry...m with distinct
    /// group events, for as long as a matching exists.
    private static func extend(_ best: inout [Chain?], group: [Int], timeline: Timeline, time: Int64, window: Int64) {
        let previous = best
        var eventsForStep = [[Int]](repeating: [], count: best.count)
        for (local, index) in group.enumerated() {
            for step in timeline.matches(index) { eventsForStep[step].append(local) }
        }
        // The highest entry first: of chains with the same start, the one that
        // reached more steps before this time has the earlier times, and is kept.
        for entry in (0..<best.count).reversed() where !eventsForStep[entry].isEmpty {
            let prefix: Chain
            if entry == 0 {
                prefix = Chain(start: time, events: [])
            } else {
                guard let chain = previous[entry - 1], within(start: chain.start, end: time, window: window) else {
                    continue
                }
                prefix = chain
            }
            var matching = GroupMatching(eventsForStep: eventsForStep, groupSize: group.count)
            for step in entry..<best.count {
                guard matching.assign(step) else { break }
                if let current = best[step], current.start >= prefix.start { continue }
                let filled = (entry...step).map { group[matching.eventOfStep[$0] ?? 0] }
                best[step] = Chain(start: prefix.start, events: prefix.events + filled)
            }
        }
    }

    /// `extend(group:)` for a group of one event: every step it matches can
    /// be entered (a new start at step 0, or the best chain before it one step
    /// further), and no chain can take it twice, since each entry reads the
    /// chains as they were before this event: the entries are visited from
    /// the highest down, so an entry's update is never read by a later one.
    private static func extend(_ best: inout [Chain?], single index: Int, timeline: Timeline, time: Int64, window: Int64) {
        for entry in timeline.matches(index).reversed() {
            let start: Int64
            if entry == 0 {
                start = time
            } else {
                guard let chain = best[entry - 1], within(start: chain.start, end: time, window: window) else { continue }
                start = chain.start
            }
            if let current = best[entry], current.start >= start { continue }
            var events: [Int] = []
            events.reserveCapacity(entry + 1)
            if entry > 0, let chain = best[entry - 1] { events += chain.events }
            events.append(index)
            best[entry] = Chain(start: start, events: events)
        }
    }

    /// `end − start ≤ window`, without overflow.
    static func within(start: Int64, end: Int64, window: Int64) -> Bool {
        let (span, overflow) = end.subtractingReportingOverflow(start)
        return !overflow && span <= window
    }
}

/// Kuhn's augmenting-path matching of steps to same-time events, grown one
/// step at a time so each prefix entry...m is checked incrementally.
struct GroupMatching {
    let eventsForStep: [[Int]]
    var stepOfEvent: [Int?]
    var eventOfStep: [Int: Int] = [:]

    init(eventsForStep: [[Int]], groupSize: Int) {
        self.eventsForStep = eventsForStep
        self.stepOfEvent = Array(repeating: nil, count: groupSize)
    }

    mutating func assign(_ step: Int) -> Bool {
        var visited = [Bool](repeating: false, count: stepOfEvent.count)
        return augment(step, visited: &visited)
    }

    private mutating func augment(_ step: Int, visited: inout [Bool]) -> Bool {
        for event in eventsForStep[step] where !visited[event] {
            visited[event] = true
            if let holder = stepOfEvent[event] {
                guard augment(holder, visited: &visited) else { continue }
            }
            stepOfEvent[event] = step
            eventOfStep[step] = event
            return true
        }
        return false
    }
}
