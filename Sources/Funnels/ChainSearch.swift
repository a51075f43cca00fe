/// The chains of a funnel with options beyond one window (docs/funnels.md,
/// "Step order", "A window per step", "Hold a property constant"): per
/// required step, the chain that first reached it (earliest time, then the
/// latest start), as `ChainSweep` gives them for a plain funnel.
///
/// `ordered` and `strict` sweep the events in time order, one timestamp at a
/// time, and keep per step the chains that may still be extended: a chain
/// is dropped only for one of the same held values that started no earlier
/// and reached the step no earlier, since everything that can extend it can
/// extend that one (a later start leaves more of the window, a later step
/// time more of a `within` and of `strict`'s next event). Chains that took
/// events of the current timestamp are compared only once it is over, so
/// same-time events can fill consecutive steps in any order without one
/// event filling two steps. `any` tries every start.
struct ChainSearch {
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
    /// later than it that counts as between two steps, or `Int64.max`.
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
                let ignored = funnel.ignore.contains { $0.matches(event) } || optional.contains { $0.matches(event) }
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
        /// Whether it took events of the timestamp being swept (compared with others only once it is over).
        var fresh: Bool
    }

    /// Per required step, the chain that first reached it.
    func firstReach() -> [Chain?] {
        funnel.order == .any ? anyOrder() : inOrder()
    }

    private func inOrder() -> [Chain?] {
        let events = timeline.events
        var fronts = [[Partial]](repeating: [], count: stepCount)
        var first = [Chain?](repeating: nil, count: stepCount)
        var groupStart = 0
        while groupStart < events.count {
            let time = events[groupStart].timestamp
            var groupEnd = groupStart + 1
            while groupEnd < events.count && events[groupEnd].timestamp == time { groupEnd += 1 }
            let group = (groupStart..<groupEnd).filter { !timeline.matches($0).isEmpty && keys[$0] != nil }
            groupStart = groupEnd
            guard !group.isEmpty else { continue }
            // Step by step, so a chain can take same-time events for consecutive steps.
            for step in 0..<stepCount {
                for index in group where timeline.matches(index).contains(step) {
                    guard let key = keys[index] else { continue }
                    if step == 0 {
                        add(Partial(start: time, last: time, key: key, events: [index], fresh: true), to: &fronts[0])
                        continue
                    }
                    for chain in fronts[step - 1] where chain.key == key && !chain.events.contains(index) {
                        guard ChainSweep.within(start: chain.start, end: time, window: window) else { continue }
                        if let limit = within[step], !ChainSweep.within(start: chain.last, end: time, window: limit) { continue }
                        if funnel.order == .strict, let last = chain.events.last, nextBetween[last] < time { continue }
                        add(Partial(start: chain.start, last: time, key: key, events: chain.events + [index], fresh: true), to: &fronts[step])
                    }
                }
            }
            for step in 0..<stepCount where first[step] == nil {
                // The first reach: the latest start among the chains that reached the step now.
                if let best = fronts[step].filter(\.fresh).max(by: { $0.start < $1.start }) {
                    first[step] = Chain(start: best.start, events: best.events)
                }
            }
            for step in 0..<stepCount { prune(&fronts[step], next: groupStart < events.count ? events[groupStart].timestamp : nil) }
        }
        return first
    }

    /// Adds `chain` unless one of the same held values that took the same
    /// events of this timestamp starts as late or later.
    private func add(_ chain: Partial, to front: inout [Partial]) {
        let time = chain.last
        let taken = Set(chain.events.filter { timeline.events[$0].timestamp == time })
        for (position, other) in front.enumerated() where other.fresh && other.key == chain.key {
            guard Set(other.events.filter { timeline.events[$0].timestamp == time }) == taken else { continue }
            if other.start >= chain.start { return }
            front[position] = chain
            return
        }
        front.append(chain)
    }

    /// Once a timestamp is over: keeps the chains no other outdoes (same
    /// held values, a start and a step time no earlier), and none that can
    /// no longer be extended before `next`, the next event's time.
    private func prune(_ front: inout [Partial], next: Int64?) {
        guard !front.isEmpty else { return }
        if let next {
            front.removeAll { chain in
                !ChainSweep.within(start: chain.start, end: next, window: window)
                    || (funnel.order == .strict && chain.events.last.map { nextBetween[$0] < next } == true)
            }
        }
        // By held values, then the latest step time first: a chain stays when it starts later than every one kept before it.
        front.sort { ($0.key, $1.last, $1.start) < ($1.key, $0.last, $0.start) }
        var kept: [Partial] = []
        var key = -1, bestStart = Int64.min
        for var chain in front {
            if chain.key != key {
                key = chain.key
                bestStart = Int64.min
            }
            guard chain.start > bestStart else { continue }
            bestStart = chain.start
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
            for index in events.indices where index != start && events[index].timestamp >= t1 && keys[index] == key {
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

    /// Keeps the chain reaching `step` at `time` from `start` if it is the earliest, then the latest start.
    private func consider(reach step: Int, at time: Int64, start: Int64, events: [Int], first: inout [Chain?], reachTime: inout [Int64?]) {
        if let current = reachTime[step], let chain = first[step] {
            guard time < current || (time == current && start > chain.start) else { return }
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
