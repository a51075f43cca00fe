import TestSupport
import Testing
@testable import Funnels

/// Compares the DP engine with a brute force that enumerates every ordered
/// chain of distinct events, on thousands of small random timelines.
@Suite struct FunnelEvaluatorPropertyTests {
    struct Reference {
        var level: Int
        /// (t1, tk) of the completing chain: earliest tk, then latest t1.
        var completion: (start: Int64, end: Int64)?
    }

    /// Written independently of the engine: plain depth-first enumeration.
    static func bruteForce(events input: [FunnelEvent], funnel: Funnel) -> Reference {
        var seen = Set<String>()
        let events = input.filter { seen.insert($0.messageId).inserted }
        let steps = funnel.steps.filter { !$0.isOptional }
        let window = funnel.windowSeconds * 1_000_000
        var level = 0
        var completion: (start: Int64, end: Int64)?
        var used = [Bool](repeating: false, count: events.count)

        func search(depth: Int, start: Int64, last: Int64) {
            level = max(level, depth)
            if depth == steps.count {
                if let current = completion {
                    if last < current.end || (last == current.end && start > current.start) {
                        completion = (start, last)
                    }
                } else {
                    completion = (start, last)
                }
                return
            }
            for index in events.indices where !used[index] {
                let event = events[index]
                guard steps[depth].matches(event) else { continue }
                if depth > 0 {
                    guard event.timestamp >= last, event.timestamp - start <= window else { continue }
                }
                used[index] = true
                search(depth: depth + 1, start: depth == 0 ? event.timestamp : start, last: event.timestamp)
                used[index] = false
            }
        }
        search(depth: 0, start: 0, last: 0)
        return Reference(level: level, completion: completion)
    }

    static func randomMatcher(_ rng: inout SplitMix) -> EventMatcher {
        let name = ["a", "b", "c"][Int(rng.next() % 3)]
        let conditions: [String: String] = rng.next() % 4 == 0 ? ["properties.x": String(rng.next() % 2)] : [:]
        return .event(name, where: conditions)
    }

    static func randomFunnel(_ rng: inout SplitMix) -> Funnel {
        let requiredCount = 1 + Int(rng.next() % 4)
        var steps: [FunnelStep] = []
        for index in 0..<requiredCount {
            if index > 0 && rng.next() % 5 == 0 {
                steps.append(FunnelStep(randomMatcher(&rng), isOptional: true))
            }
            let matchers = rng.next() % 4 == 0
                ? [randomMatcher(&rng), randomMatcher(&rng)]
                : [randomMatcher(&rng)]
            steps.append(FunnelStep(matchers: matchers))
        }
        let window = [0, 1, 3, 5, 10][Int(rng.next() % 5)]
        return Funnel(name: "random", app: "x", windowSeconds: Int64(window), steps: steps)
    }

    static func randomTimeline(_ rng: inout SplitMix) -> [FunnelEvent] {
        let count = 2 + Int(rng.next() % 7)
        var events: [FunnelEvent] = []
        for index in 0..<count {
            if !events.isEmpty && rng.next() % 8 == 0 {
                events.append(events[Int(rng.next() % UInt64(events.count))]) // duplicate delivery
                continue
            }
            var attributes: [String: String] = [:]
            if rng.next() % 3 != 0 { attributes["properties.x"] = String(rng.next() % 2) }
            events.append(FunnelEvent(
                messageId: "m\(index)", kind: rng.next() % 10 == 0 ? .screen : .track,
                name: ["a", "b", "c"][Int(rng.next() % 3)],
                timestamp: Int64(rng.next() % 12) * 1_000_000,
                attributes: attributes
            ))
        }
        events.shuffle(using: &rng)
        return events
    }

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func engineMatchesBruteForce(seed: UInt64) {
        var rng = SplitMix(seed: seed)
        var completions = 0, partial = 0
        for iteration in 0..<2_500 {
            let funnel = Self.randomFunnel(&rng)
            let events = Self.randomTimeline(&rng)
            let outcome = FunnelEvaluator.evaluate(events: events, funnel: funnel, now: Int64.max)
            let reference = Self.bruteForce(events: events, funnel: funnel)
            if reference.completion != nil && funnel.requiredStepIndices.count > 1 { completions += 1 }
            if reference.level > 0 && reference.completion == nil { partial += 1 }
            let context = Comment(rawValue: "seed \(seed) iteration \(iteration): \(funnel.steps) \(events)")
            // Without duplicates (the earliest copy kept, in any order) the job's
            // entry point, which skips deduplication, must agree.
            var earliest: [String: FunnelEvent] = [:]
            for event in events where earliest[event.messageId].map({ event.timestamp < $0.timestamp }) ?? true {
                earliest[event.messageId] = event
            }
            let distinct = earliest.values.sorted { $0.messageId < $1.messageId }.shuffled(using: &rng)
            #expect(FunnelEvaluator.evaluate(distinctEvents: distinct, funnel: funnel, now: Int64.max) == outcome, context)
            #expect(outcome.level == reference.level, context)
            #expect(outcome.completed == (reference.completion != nil), context)
            #expect(outcome.completionTime == reference.completion?.end, context)
            if let completion = reference.completion {
                #expect(outcome.chainStartTime == completion.start, context)
                #expect(outcome.microsecondsToComplete == completion.end - completion.start, context)
            }
            // The reported chain is itself valid: ordered, in window, matching.
            let required = funnel.requiredStepIndices
            let times = required.prefix(outcome.level).compactMap { outcome.stepTimes[$0] }
            #expect(times.count == outcome.level, context)
            #expect(zip(times, times.dropFirst()).allSatisfy { $0 <= $1 }, context)
            if let first = times.first, let last = times.last {
                #expect(last - first <= funnel.windowMicroseconds, context)
                #expect(outcome.chainStartTime == first, context)
            }
        }
        // The generator must exercise multi-step completions and drop-offs, not just empty funnels.
        #expect(completions > 150, "completions \(completions)")
        #expect(partial > 500, "partial \(partial)")
    }
}
