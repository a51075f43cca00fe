import Foundation
import TestSupport
import Testing
@testable import Funnels

/// A cell's persons are exactly the persons the report counts there: for
/// random funnels (every order, `within`, `hold`, exclusions, optional steps)
/// and random histories, each cell's size is the report's number, and a
/// required step's persons are those the brute force (docs/funnels.md
/// alone) finds at that level or beyond.
@Suite struct PersonCellTests {
    static let utc = TimeZone(identifier: "UTC") ?? .gmt

    @Test(arguments: [UInt64(21), 22, 23])
    func cellsAreTheReportsNumbers(seed: UInt64) {
        var rng = SplitMix(seed: seed)
        var seen: [String: Int] = [:]
        for iteration in 0..<150 {
            let funnel = FunnelOptionsPropertyTests.randomFunnel(&rng)
            let now = 6_000_000 + Int64(rng.next() % 8) * 1_000_000
            let histories = (0..<30).map { _ in FunnelOptionsPropertyTests.randomHistory(&rng) }
            let outcomes = histories.map { FunnelEvaluator.evaluate(events: $0, funnel: funnel, now: now) }
            let report = FunnelReport(funnel: funnel, outcomes: outcomes, now: now, timeZone: Self.utc)
            let required = funnel.requiredStepIndices
            let context = Comment(rawValue: "seed \(seed) iteration \(iteration): \(funnel)")
            func members(_ text: String) -> [Int] {
                guard let cell = try? PersonCell.parse(text, in: funnel) else { return [] }
                return outcomes.indices.filter { cell.contains(outcomes[$0], required: required) }
            }
            for row in report.steps {
                #expect(members("reached:\(row.index)").count == row.persons, context)
                guard !row.isOptional else { continue }
                #expect(members("dropped:\(row.index)").count == row.dropOff, context)
                #expect(members("in_progress:\(row.index)").count == row.inProgress, context)
                let position = required.firstIndex(of: row.index - 1) ?? 0
                if position + 1 < required.count {
                    #expect(members("converted:\(row.index)").count == report.steps[required[position + 1]].persons, context)
                }
                // Against the brute force: the persons at this level or beyond (exclusions aside, which it does not apply).
                let reference = histories.indices.filter { index in
                    !outcomes[index].excluded && FunnelReference.bruteForce(events: histories[index], funnel: funnel).level > position
                }
                #expect(members("reached:\(row.index)") == reference, context)
                seen["dropped", default: 0] += row.dropOff
                seen["in progress", default: 0] += row.inProgress
            }
            if funnel.steps.contains(where: \.isOptional) { seen["optional", default: 0] += 1 }
        }
        #expect(seen["dropped", default: 0] > 100 && seen["in progress", default: 0] > 20 && seen["optional", default: 0] > 10, "\(seen)")
    }

    @Test("a cell names a row and an outcome that exist, and a breakdown the funnel has")
    func badCells() throws {
        var funnel = Funnel(
            name: "f", app: "x", windowSeconds: 60,
            steps: [FunnelStep(.event("a")), FunnelStep(.event("b"), isOptional: true), FunnelStep(.event("c"))],
            breakdowns: ["context.os.name"])
        funnel.order = .ordered
        #expect(try PersonCell.parse("dropped:1", in: funnel) == PersonCell(.dropped, step: 1))
        #expect(try PersonCell.parse("reached:2", breakdownValue: "context.os.name=iOS", in: funnel)
            == PersonCell(.reached, step: 2, breakdown: .init(path: "context.os.name", value: "iOS")))
        let refused: [(String, String?, PersonCellError)] = [
            ("left:1", nil, .unknownOutcome("left")),
            ("dropped:4", nil, .stepOutOfRange(4, steps: 3)),
            ("dropped:0", nil, .stepOutOfRange(0, steps: 3)),
            ("dropped", nil, .malformed("dropped")),
            ("dropped:two", nil, .malformed("dropped:two")),
            ("dropped:2", nil, .optionalStep(.dropped, step: 2)),
            ("converted:3", nil, .convertedAtLastStep(3)),
            ("reached:1", "os", .malformedBreakdownValue("os")),
            ("reached:1", "context.app.version=1", .notABreakdown("context.app.version", breakdowns: ["context.os.name"])),
        ]
        for (text, value, error) in refused {
            #expect(throws: error) { try PersonCell.parse(text, breakdownValue: value, in: funnel) }
        }
        #expect("\(PersonCellError.unknownOutcome("left"))".contains("expected reached, converted, dropped or in_progress"))
    }
}
