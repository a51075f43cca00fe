import TestSupport
import Testing
@testable import Funnels

/// The funnel options (`order`, `within`, `hold`, `ignore`, exclusions
/// `between`, `attribution`) against a brute force written from
/// docs/funnels.md alone: every candidate chain enumerated, on thousands of
/// small random histories with ties, duplicates and repeated steps.
@Suite struct FunnelOptionsPropertyTests {
    static let names = ["a", "b", "c", "d"]

    static func randomMatcher(_ rng: inout SplitMix) -> EventMatcher {
        let conditions: [String: String] = rng.next() % 5 == 0 ? ["properties.x": String(rng.next() % 2)] : [:]
        return .event(names[Int(rng.next() % 4)], where: conditions)
    }

    static func randomFunnel(_ rng: inout SplitMix) -> Funnel {
        let order = Funnel.Order.allCases[Int(rng.next() % 3)]
        let requiredCount = 1 + Int(rng.next() % 4)
        var steps: [FunnelStep] = []
        for index in 0..<requiredCount {
            if order != .any && index > 0 && rng.next() % 6 == 0 { steps.append(FunnelStep(randomMatcher(&rng), isOptional: true)) }
            var step = FunnelStep(matchers: rng.next() % 5 == 0 ? [randomMatcher(&rng), randomMatcher(&rng)] : [randomMatcher(&rng)])
            if order != .any && index > 0 && rng.next() % 3 == 0 { step.within = Int64(rng.next() % 4) }
            steps.append(step)
        }
        var funnel = Funnel(name: "random", app: "x", windowSeconds: [0, 2, 4, 6, 11][Int(rng.next() % 5)], steps: steps)
        funnel.order = order
        funnel.breakdowns = ["properties.y"]
        if rng.next() % 3 == 0 { funnel.hold = ["properties.x"] }
        if order == .strict && rng.next() % 2 == 0 { funnel.ignore = [.event("hb")] }
        let required = funnel.requiredStepIndices
        if rng.next() % 3 == 0 {
            var exclusion = Exclusion(.event(["e", "hb", "a"][Int(rng.next() % 3)]))
            if order != .any && required.count >= 2 && rng.next() % 2 == 0 {
                let i = Int(rng.next() % UInt64(required.count - 1))
                let j = i + 1 + Int(rng.next() % UInt64(required.count - 1 - i))
                exclusion.between = required[i]...required[j]
            }
            funnel.exclusions = [exclusion]
        }
        switch rng.next() % 3 {
        case 0: funnel.attribution = .lastStep
        case 1 where order != .any: funnel.attribution = .step(Int(rng.next() % UInt64(steps.count)))
        default: break
        }
        return funnel
    }

    static func randomHistory(_ rng: inout SplitMix) -> [FunnelEvent] {
        let count = 2 + Int(rng.next() % 8)
        var events: [FunnelEvent] = []
        for index in 0..<count {
            if !events.isEmpty && rng.next() % 8 == 0 {
                var again = events[Int(rng.next() % UInt64(events.count))]  // delivered twice, maybe later
                again.timestamp += Int64(rng.next() % 2) * 1_000_000
                events.append(again)
                continue
            }
            var attributes: [String: String] = [:]
            if rng.next() % 4 != 0 { attributes["properties.x"] = String(rng.next() % 2) }
            if rng.next() % 3 != 0 { attributes["properties.y"] = String(rng.next() % 3) }
            let name = rng.next() % 6 == 0 ? ["e", "hb"][Int(rng.next() % 2)] : names[Int(rng.next() % 4)]
            // Now and then who they are (identify) or a page, which strict order treats differently.
            let kind: EventKind = rng.next() % 10 == 0 ? .identify : rng.next() % 12 == 0 ? .page : .track
            events.append(FunnelEvent(
                messageId: "m\(index)", kind: kind, name: kind == .identify ? nil : name, timestamp: Int64(rng.next() % 12) * 1_000_000,
                attributes: attributes))
        }
        events.shuffle(using: &rng)
        return events
    }

    @Test(arguments: [UInt64(11), 12, 13, 14])
    func engineMatchesBruteForce(seed: UInt64) {
        var rng = SplitMix(seed: seed)
        var seen: [String: Int] = [:]
        for iteration in 0..<5_000 {
            let funnel = Self.randomFunnel(&rng)
            let events = Self.randomHistory(&rng)
            let outcome = FunnelEvaluator.evaluate(events: events, funnel: funnel, now: Int64.max)
            let reference = FunnelReference.bruteForce(events: events, funnel: funnel)
            let context = Comment(rawValue: "seed \(seed) iteration \(iteration): \(funnel) \(events)")
            let required = funnel.requiredStepIndices
            #expect(outcome.level == reference.level, context)
            // A plain funnel with an option that changes nothing (a path every event holds,
            // a window per step as long as the funnel's) takes the general search, and reports the same chain.
            if funnel.isPlainWindowFunnel {
                var noOp = funnel
                if rng.next() % 2 == 0 { noOp.hold = ["context.app.id"] } else { noOp.steps[noOp.steps.count - 1].within = noOp.windowSeconds }
                let held = events.map { event in
                    var event = event
                    event.attributes["context.app.id"] = "x"
                    return event
                }
                let same = FunnelEvaluator.evaluate(events: held, funnel: noOp, now: Int64.max)
                #expect(same.level == outcome.level && same.stepTimes == outcome.stepTimes && same.chainStartTime == outcome.chainStartTime, context)
                #expect(same.excluded == outcome.excluded && same.optionalStepsDone == outcome.optionalStepsDone, context)
                seen["no-op option", default: 0] += 1
            }
            #expect(outcome.completed == (reference.level == required.count && reference.level > 0), context)
            guard outcome.level > 0, outcome.level == reference.level else { continue }
            seen["\(funnel.order)", default: 0] += 1
            if outcome.completed { seen["completed", default: 0] += 1 }
            if !funnel.hold.isEmpty { seen["hold", default: 0] += 1 }
            if funnel.steps.contains(where: { $0.within != nil }) { seen["within", default: 0] += 1 }
            if outcome.excluded { seen["excluded", default: 0] += 1 }
            // The reported chain is the first to reach the level, with the latest start.
            let best = reference.firstReach[reference.level - 1]
            let times = required.prefix(outcome.level).compactMap { outcome.stepTimes[$0] }
            #expect(times.count == outcome.level, context)
            #expect(times.max() == best.end, context)
            #expect(outcome.chainStartTime == best.start, context)
            #expect(times.first == best.start, context)
            // Every step's time is the reference's: the earliest, step by step (with `any`, in the order done).
            #expect(times == best.times, context)
            if outcome.completed {
                #expect(outcome.completionTime == best.end, context)
                #expect(outcome.microsecondsToComplete == best.end - best.start, context)
            }
            // The chain's own times keep every rule.
            #expect(zip(times, times.dropFirst()).allSatisfy { $0 <= $1 }, context)
            #expect((times.last ?? 0) - (times.first ?? 0) <= funnel.windowMicroseconds, context)
            if funnel.order != .any {
                for (position, index) in required.enumerated().dropFirst() where position < times.count {
                    if let within = funnel.steps[index].within { #expect(times[position] - times[position - 1] <= within * 1_000_000, context) }
                }
            }
            // An exclusion between steps i and j looks from step i's time to step j's (or the last reached).
            let unique = FunnelReference.distinct(events)
            let excluded = funnel.exclusions.contains { exclusion in
                var lower = times[0], upper = times[times.count - 1]
                if let between = exclusion.between {
                    guard let from = required.firstIndex(of: between.lowerBound), from < times.count,
                          let to = required.firstIndex(of: between.upperBound) else { return false }
                    lower = times[from]
                    upper = times[min(to, times.count - 1)]
                }
                return unique.contains { $0.timestamp >= lower && $0.timestamp <= upper && exclusion.matcher.matches($0) }
            }
            #expect(outcome.excluded == excluded, context)
            // Attribution: the value of an event of the attributed step at its time.
            let attributedStep: Int? = switch funnel.attribution {
            case .firstStep: nil
            case .lastStep: funnel.order == .any ? nil : required[outcome.level - 1]
            case .step(let index): index
            }
            if let step = attributedStep {
                let value = outcome.breakdown["properties.y"]
                if let time = outcome.stepTimes[step] {
                    let candidates = unique.filter { $0.timestamp == time && funnel.steps[step].matches($0) }
                        .map { $0.attributes["properties.y"] ?? PersonOutcome.missingBreakdownValue }
                    #expect(candidates.contains(value ?? ""), context)
                } else {
                    #expect(value == PersonOutcome.missingBreakdownValue, context)
                }
            }
        }
        // Every option must have been exercised, with completions and exclusions.
        #expect((seen["no-op option"] ?? 0) > 500, "\(seen)")
        for (name, least) in [("ordered", 600), ("strict", 600), ("any", 600), ("completed", 700), ("hold", 400), ("within", 400), ("excluded", 80)] {
            #expect((seen[name] ?? 0) >= least, "\(name): \(seen[name] ?? 0) of \(seen)")
        }
    }
}
