public import Funnels

/// A brute force of the engine's chain rules, written from docs/funnels.md
/// alone: every candidate chain enumerated. For small histories only (the
/// property tests' and the query-time tests').
public enum FunnelReference {
    /// What the brute force finds for one person.
    public struct Reference: Sendable {
        public init() {}

        public var level = 0
        /// Per level reached (index level − 1): the earliest time a chain
        /// reaches it, the latest start among the chains reaching it then,
        /// and of those the earliest times, step by step.
        public var firstReach: [(end: Int64, start: Int64, times: [Int64])] = []
    }

    /// docs/funnels.md, "Step order", "A window per step", "Hold a property
    /// constant", by enumeration.
    public static func bruteForce(events input: [FunnelEvent], funnel: Funnel) -> Reference {
        let events = distinct(input)
        let required = funnel.steps.filter { !$0.isOptional }
        let optional = funnel.steps.filter(\.isOptional)
        let window = funnel.windowSeconds * 1_000_000
        func held(_ event: FunnelEvent) -> [String]? {
            var values: [String] = []
            for path in funnel.hold {
                guard let value = event.attributes[path] else { return nil }
                values.append(value)
            }
            return values
        }
        // An event that, strictly between two steps' times, breaks a strict chain.
        func counts(_ event: FunnelEvent) -> Bool {
            [.track, .screen, .page].contains(event.kind)
                && !funnel.ignore.contains { $0.matches(event) } && !optional.contains { $0.matches(event) }
        }
        var reference = Reference()
        func record(level: Int, end: Int64, start: Int64, times: [Int64] = []) {
            reference.level = max(reference.level, level)
            while reference.firstReach.count < level { reference.firstReach.append((Int64.max, Int64.min, [])) }
            let current = reference.firstReach[level - 1]
            if end < current.end || (end == current.end && start > current.start)
                || (end == current.end && start == current.start && times.lexicographicallyPrecedes(current.times)) {
                reference.firstReach[level - 1] = (end, start, times)
            }
        }
        var used = [Bool](repeating: false, count: events.count)

        if funnel.order == .any {
            // From every start: each subset of the other steps done by distinct events in the window.
            for first in events.indices where required[0].matches(events[first]) {
                guard let key = held(events[first]) else { continue }
                let t1 = events[first].timestamp
                used[first] = true
                record(level: 1, end: t1, start: t1, times: [t1])
                var chosen: [Int64] = [t1]
                func assign(step: Int, done: Int, latest: Int64) {
                    if done > 1 { record(level: done, end: latest, start: t1, times: chosen.sorted()) }
                    guard step < required.count else { return }
                    assign(step: step + 1, done: done, latest: latest)
                    for index in events.indices where !used[index] {
                        let event = events[index]
                        guard required[step].matches(event), held(event) == key, event.timestamp >= t1,
                              event.timestamp - t1 <= window else { continue }
                        used[index] = true
                        chosen.append(event.timestamp)
                        assign(step: step + 1, done: done + 1, latest: max(latest, event.timestamp))
                        chosen.removeLast()
                        used[index] = false
                    }
                }
                assign(step: 1, done: 1, latest: t1)
                used[first] = false
            }
            return reference
        }

        var times: [Int64] = []
        func search(depth: Int, start: Int64, last: Int64, key: [String]?) {
            if depth > 0 { record(level: depth, end: last, start: start, times: times) }
            guard depth < required.count else { return }
            for index in events.indices where !used[index] {
                let event = events[index]
                guard required[depth].matches(event), let values = held(event) else { continue }
                if depth > 0 {
                    guard values == key, event.timestamp >= last, event.timestamp - start <= window else { continue }
                    if let within = required[depth].within, event.timestamp - last > within * 1_000_000 { continue }
                    if funnel.order == .strict,
                       events.contains(where: { $0.timestamp > last && $0.timestamp < event.timestamp && counts($0) }) { continue }
                }
                used[index] = true
                times.append(event.timestamp)
                search(depth: depth + 1, start: depth == 0 ? event.timestamp : start, last: event.timestamp, key: values)
                times.removeLast()
                used[index] = false
            }
        }
        search(depth: 0, start: 0, last: 0, key: nil)
        return reference
    }

    /// Each message once, its earliest copy, by message id.
    public static func distinct(_ events: [FunnelEvent]) -> [FunnelEvent] {
        var byId: [String: FunnelEvent] = [:]
        for event in events where byId[event.messageId].map({ event.timestamp < $0.timestamp }) ?? true { byId[event.messageId] = event }
        return byId.values.sorted { $0.messageId < $1.messageId }
    }
}
