/// The chains of a funnel with options beyond one window (docs/funnels.md,
/// "Step order", "A window per step", "Hold a property constant"): per
/// required step, the chain that first reached it (earliest time, then the
/// latest start, then the earliest times step by step), as `ChainSweep`
/// gives them for a plain funnel.
///
/// `ordered` and `strict` sweep the events in time order, one timestamp at a
/// time, and keep per step the chains that may still be extended: a chain
/// is dropped only for one of the same held values that started no earlier,
/// reached the step no earlier (when that matters) and is the better one to
/// report (`precedes`), since everything that can extend it can extend that one (a later start
/// leaves more of the window, a later step time more of a `within` and of
/// `strict`'s next event). Same-time events fill consecutive steps by a
/// matching, as in `ChainSweep`, so one event never fills two steps and the
/// work stays polynomial. `any` tries every start. A class, so the many
/// closures of the search share it rather than copy its arrays.
final class ChainSearch {
    let timeline: Timeline
    let funnel: Funnel
    let stepCount: Int
    let window: Int64
    /// Per required position, the step's `within`.
    let within: [Int64?]
    /// Per event, the index of its held values (nil: it lacks one; 0 when nothing is held).
    let keys: [Int?]
    /// Per event, with `strict`: the earliest time after it of an event that
    /// would come between two steps (not ignored, not an optional step's).
    let nextBetween: [Int64]

    init(timeline: Timeline, funnel: Funnel) {
        self.timeline = timeline
        self.funnel = funnel
        let required = funnel.requiredStepIndices
        stepCount = required.count
        window = funnel.windowMicroseconds
        within = required.map { funnel.steps[$0].withinMicroseconds }
        keys = Self.heldKeys(timeline, paths: funnel.hold)
        nextBetween = funnel.order == .strict ? Self.nextBetweenTimes(timeline.events, funnel: funnel) : []
    }

    /// Per event that fills some step, an index standing for its values at
    /// `paths` (equal values, equal index); nil when it lacks one, and for
    /// the other events, which are on no chain.
    static func heldKeys(_ timeline: Timeline, paths: [String]) -> [Int?] {
        let events = timeline.events
        guard !paths.isEmpty else { return Array(repeating: 0, count: events.count) }
        var keys = [Int?](repeating: nil, count: events.count)
        if paths.count == 1, let path = paths.first {
            var indices: [String: Int] = [:]
            for index in events.indices where !timeline.matches(index).isEmpty {
                guard let value = events[index].attributes[path] else { continue }
                keys[index] = indices[value] ?? {
                    indices[value] = indices.count
                    return indices.count - 1
                }()
            }
            return keys
        }
        var indices: [[String]: Int] = [:]
        for index in events.indices where !timeline.matches(index).isEmpty {
            guard let values = heldValues(events[index], paths: paths) else { continue }
            keys[index] = indices[values] ?? {
                indices[values] = indices.count
                return indices.count - 1
            }()
        }
        return keys
    }

    /// The held values of `event` at `paths`, nil when it lacks one.
    static func heldValues(_ event: FunnelEvent, paths: [String]) -> [String]? {
        var values: [String] = []
        for path in paths {
            guard let value = event.attributes[path] else { return nil }
            values.append(value)
        }
        return values
    }

    /// For each event (sorted by time), the time of the first event strictly
    /// later than it that counts as between two steps, or `Int64.max`: a
    /// person's action (track, screen, page), not ignored and not an optional
    /// step's; identify, group and alias messages say who they are, not what
    /// they did, and are never between.
    static func nextBetweenTimes(_ events: [FunnelEvent], funnel: Funnel) -> [Int64] {
        let optional = funnel.steps.filter(\.isOptional)
        var next = [Int64](repeating: Int64.max, count: events.count)
        var later = Int64.max
        var index = events.count - 1
        while index >= 0 {
            // Every event of this timestamp gets the first counting time after it.
            var first = index
            while first > 0 && events[first - 1].timestamp == events[index].timestamp { first -= 1 }
            for i in first...index { next[i] = later }
            for i in first...index {
                let event = events[i]
                let action = event.kind == .track || event.kind == .screen || event.kind == .page
                let ignored = !action || funnel.ignore.contains { $0.matches(event) } || optional.contains { $0.matches(event) }
                if !ignored { later = event.timestamp }
            }
            index = first - 1
        }
        return next
    }

    /// A chain being built: its events fill required steps 0..<events.count.
    struct Partial {
        var start: Int64
        var last: Int64
        var key: Int
        var events: [Int]
        /// Whether it reached its step at the timestamp being swept.
        var fresh: Bool
    }

    /// Per required step, the chain that first reached it.
    func firstReach() -> [Chain?] {
        funnel.order == .any ? anyOrder() : inOrder()
    }

    /// Whether only a chain's start matters for what can extend it (no
    /// `within`, not `strict`): then of two chains of the same held values
    /// and start, the one with the earlier times is kept, as the plain sweep keeps it.
    private var onlyStartMatters: Bool {
        funnel.order == .ordered && within.allSatisfy { $0 == nil }
    }

    private func inOrder() -> [Chain?] {
        let events = timeline.events
        var fronts = [[Partial]](repeating: [], count: stepCount)
        var first = [Chain?](repeating: nil, count: stepCount)
        var groupStart = 0
        var reached = [Bool](repeating: false, count: stepCount)
        while groupStart < events.count {
            let time = events[groupStart].timestamp
            var groupEnd = groupStart + 1
            while groupEnd < events.count && events[groupEnd].timestamp == time { groupEnd += 1 }
            let group = (groupStart..<groupEnd).filter { !timeline.matches($0).isEmpty && keys[$0] != nil }
            groupStart = groupEnd
            guard !group.isEmpty else { continue }
            for step in reached.indices { reached[step] = false }
            if group.count == 1 {
                extend(&fronts, single: group[0], time: time, reached: &reached)
            } else {
                extend(&fronts, group: group, time: time, reached: &reached)
            }
            let next = groupStart < events.count ? events[groupStart].timestamp : nil
            for step in 0..<stepCount {
                if reached[step] && first[step] == nil {
                    // The first reach: the latest start among the chains that reached the step now, then the earliest times.
                    if let best = fronts[step].filter(\.fresh).min(by: { precedes($0, $1) }) {
                        first[step] = Chain(start: best.start, events: best.events)
                    }
                }
                prune(&fronts[step], next: next, compare: reached[step])
            }
        }
        return first
    }

    /// `extend(group:)` for an event alone at its time, the usual case: it
    /// can fill each step it matches, for a new chain at the first step or
    /// for each chain reaching the step before. The steps are visited from
    /// the highest down, so no chain takes it twice.
    private func extend(_ fronts: inout [[Partial]], single index: Int, time: Int64, reached: inout [Bool]) {
        guard let key = keys[index] else { return }
        for step in timeline.matches(index).reversed() {
            if step == 0 {
                fronts[0].append(Partial(start: time, last: time, key: key, events: [index], fresh: true))
                reached[0] = true
                continue
            }
            for chain in fronts[step - 1] where chain.key == key && canExtend(chain, toStep: step, at: time) {
                fronts[step].append(Partial(start: chain.start, last: time, key: key, events: chain.events + [index], fresh: true))
                reached[step] = true
            }
        }
    }

    /// The chains one timestamp's events make: a chain may enter the group
    /// at any step (from a chain reaching the step before, or as a new start
    /// at the first step) and fill that step and the next ones with distinct
    /// events of its held values at this time, as long as a matching of
    /// steps to events exists (`GroupMatching`, as `ChainSweep` does): the
    /// work is polynomial however many events share the timestamp.
    private func extend(_ fronts: inout [[Partial]], group: [Int], time: Int64, reached: inout [Bool]) {
        let previous = fronts
        var byKey: [Int: [Int]] = [:]
        for index in group { if let key = keys[index] { byKey[key, default: []].append(index) } }
        for (key, members) in byKey.sorted(by: { $0.key < $1.key }) {
            var eventsForStep = [[Int]](repeating: [], count: stepCount)
            for (local, index) in members.enumerated() {
                for step in timeline.matches(index) { eventsForStep[step].append(local) }
            }
            for entry in 0..<stepCount where !eventsForStep[entry].isEmpty {
                let prefixes = entry == 0
                    ? [Partial(start: time, last: time, key: key, events: [], fresh: true)]
                    : previous[entry - 1].filter { $0.key == key && canExtend($0, toStep: entry, at: time) }
                for prefix in prefixes {
                    var matching = GroupMatching(eventsForStep: eventsForStep, groupSize: members.count)
                    for step in entry..<stepCount {
                        guard matching.assign(step) else { break }
                        let filled = (entry...step).map { members[matching.eventOfStep[$0] ?? 0] }
                        fronts[step].append(Partial(start: prefix.start, last: time, key: key, events: prefix.events + filled, fresh: true))
                        reached[step] = true
                    }
                }
            }
        }
    }

    /// Whether `chain` may take an event at `time` for required step `step`:
    /// within the window from its start, within the step's `within` from its
    /// last step, and with `strict`, nothing between.
    private func canExtend(_ chain: Partial, toStep step: Int, at time: Int64) -> Bool {
        guard ChainSweep.within(start: chain.start, end: time, window: window) else { return false }
        if let limit = within[step], !ChainSweep.within(start: chain.last, end: time, window: limit) { return false }
        if funnel.order == .strict, let last = chain.events.last, nextBetween[last] < time { return false }
        return true
    }

    /// `a` is the better chain to report: the later start, then the earlier
    /// times step by step, then the earlier events for a stable choice.
    private func precedes(_ a: Partial, _ b: Partial) -> Bool {
        if a.start != b.start { return a.start > b.start }
        let events = timeline.events
        for (x, y) in zip(a.events, b.events) where events[x].timestamp != events[y].timestamp {
            return events[x].timestamp < events[y].timestamp
        }
        return a.events.lexicographicallyPrecedes(b.events)
    }

    /// Once a timestamp is over: drops the chains that can no longer be
    /// extended before `next`, the next event's time, and those another of
    /// the same held values outdoes: it starts no earlier, reaches the step
    /// no earlier (unless only starts matter) and is the better chain to
    /// report; everything that can extend the one dropped can extend it.
    private func prune(_ front: inout [Partial], next: Int64?, compare: Bool) {
        guard !front.isEmpty else { return }
        if let next {
            front.removeAll { chain in
                !ChainSweep.within(start: chain.start, end: next, window: window)
                    || (funnel.order == .strict && chain.events.last.map { nextBetween[$0] < next } == true)
            }
        }
        // Only new chains can outdo or be outdone: the others were compared when they were new.
        guard compare else { return }
        front.sort { precedes($0, $1) }
        var kept: [Partial] = []
        for var chain in front {
            let outdone = kept.contains { other in
                other.key == chain.key && other.start >= chain.start && (onlyStartMatters || other.last >= chain.last)
            }
            guard !outdone else { continue }
            chain.fresh = false
            kept.append(chain)
        }
        front = kept
    }

    /// `order: any`: from each step-1 event, the other required steps done by
    /// distinct events of the same held values within the window, in any
    /// order, as many as a matching of steps to events allows; a chain's
    /// events are listed in the order they were done.
    private func anyOrder() -> [Chain?] {
        let events = timeline.events
        var first = [Chain?](repeating: nil, count: stepCount)
        var reachTime = [Int64?](repeating: nil, count: stepCount)
        for start in events.indices where timeline.startsFunnel(start) {
            guard let key = keys[start] else { continue }
            let t1 = events[start].timestamp
            // Steps 2…n matched to events: step -> event, event -> step.
            var eventOfStep = [Int?](repeating: nil, count: stepCount)
            var stepOfEvent: [Int: Int] = [:]
            var done = 1
            consider(reach: 0, at: t1, start: t1, events: [start], first: &first, reachTime: &reachTime)
            // From the first event at the start's time: the events are in time order.
            var from = start
            while from > 0 && events[from - 1].timestamp == t1 { from -= 1 }
            for index in from..<events.count where index != start && keys[index] == key {
                guard ChainSweep.within(start: t1, end: events[index].timestamp, window: window) else { break }
                let steps = timeline.matches(index).filter { $0 > 0 }
                guard !steps.isEmpty else { continue }
                var visited = Set<Int>()
                guard augment(index, steps: { timeline.matches($0).filter { $0 > 0 } }, eventOfStep: &eventOfStep,
                              stepOfEvent: &stepOfEvent, visited: &visited) else { continue }
                done += 1
                let chainEvents = [start] + eventOfStep.compactMap { $0 }.sorted { (events[$0].timestamp, $0) < (events[$1].timestamp, $1) }
                consider(reach: done - 1, at: events[index].timestamp, start: t1, events: chainEvents, first: &first, reachTime: &reachTime)
                if done == stepCount { break }
            }
        }
        return first
    }

    /// Keeps the chain reaching `step` at `time` from `start` if it is the
    /// earliest, then the latest start, then the earliest times in the order done.
    private func consider(reach step: Int, at time: Int64, start: Int64, events: [Int], first: inout [Chain?], reachTime: inout [Int64?]) {
        if let current = reachTime[step], let chain = first[step] {
            let times = events.map { timeline.events[$0].timestamp }, held = chain.events.map { timeline.events[$0].timestamp }
            guard time < current || (time == current && start > chain.start)
                || (time == current && start == chain.start && times.lexicographicallyPrecedes(held)) else { return }
        }
        reachTime[step] = time
        first[step] = Chain(start: start, events: events)
    }

    /// Kuhn's augmenting path from event `index` to a free step.
    private func augment(
        _ index: Int, steps: (Int) -> [Int], eventOfStep: inout [Int?], stepOfEvent: inout [Int: Int], visited: inout Set<Int>
    ) -> Bool {
        for step in steps(index) where visited.insert(step).inserted {
            if let holder = eventOfStep[step] {
                guard augment(holder, steps: steps, eventOfStep: &eventOfStep, stepOfEvent: &stepOfEvent, visited: &visited) else {
                    continue
                }
            }
            eventOfStep[step] = index
            stepOfEvent[index] = step
            return true
        }
        return false
    }
}
