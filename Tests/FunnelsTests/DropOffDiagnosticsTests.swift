import Foundation
@testable import Funnels
import Testing

/// The statistics of the drop-off drivers against published values and exact
/// rational arithmetic (Python's `fractions` over every table with the same
/// margins, R's `fisher.test` and `p.adjust(…, "BH")`), and the per-person
/// facts on timelines worked out by hand.
@Suite struct DropOffDiagnosticsTests {
    @Test("Fisher's exact two-sided p equals the exact rational sum, for small, lopsided, zero-celled and large tables", arguments: [
        (TwoByTwo(a: 3, b: 1, c: 1, d: 3), 0.4857142857142857),  // R: fisher.test(matrix(c(3,1,1,3),2))
        (TwoByTwo(a: 1, b: 9, c: 11, d: 3), 0.0027594561852200836),
        (TwoByTwo(a: 10, b: 20, c: 30, d: 40), 0.5044757698516282),
        (TwoByTwo(a: 0, b: 5, c: 12, d: 3), 0.003611971104231166),
        (TwoByTwo(a: 120, b: 80, c: 900, d: 300), 2.2471851120270032e-05),
        (TwoByTwo(a: 7, b: 0, c: 0, d: 7), 0.0005827505827505828),
        (TwoByTwo(a: 45, b: 55, c: 60, d: 40), 0.04716548538301928),
        (TwoByTwo(a: 2, b: 30, c: 400, d: 50), 7.541679683987157e-24),
    ])
    func fisherExact(table: TwoByTwo, expected: Double) {
        let p = table.fisherExactP
        #expect(abs(p - expected) <= 1e-9 * expected, "\(table): \(p)")
        // The test does not care which way round the table is written.
        #expect(abs(TwoByTwo(a: table.c, b: table.d, c: table.a, d: table.b).fisherExactP - expected) <= 1e-9 * expected)
    }

    @Test("a table far in the tail of a hundred thousand persons is tiny, not zero or a trap; an empty table is 1")
    func fisherExtremes() {
        let p = TwoByTwo(a: 50_000, b: 0, c: 0, d: 50_000).fisherExactP
        #expect(p >= 0 && p < 1e-300)
        #expect(TwoByTwo(a: 0, b: 0, c: 0, d: 0).fisherExactP == 1)
        #expect(TwoByTwo(a: 5, b: 0, c: 7, d: 0).fisherExactP == 1)
    }

    @Test("Benjamini–Hochberg matches R's p.adjust(p, \"BH\") and keeps the input order")
    func benjaminiHochberg() {
        let p = [0.051, 0.005, 0.387, 0.009, 0.019, 0.361, 0.022, 0.101]
        let expected = [0.0816, 0.036, 0.387, 0.036, 0.044, 0.387, 0.044, 0.134_666_666_666_666_7]
        for (q, e) in zip(Statistics.benjaminiHochberg(p), expected) { #expect(abs(q - e) < 1e-12) }
        #expect(Statistics.benjaminiHochberg([]) == [])
    }

    @Test("odds ratio and Woolf interval by their definition; 0.5 added to every cell when one is zero")
    func oddsRatio() {
        let plain = TwoByTwo(a: 10, b: 20, c: 30, d: 40).oddsRatio
        #expect(abs(plain.value - 400.0 / 600.0) < 1e-12)
        let spread = Statistics.z95 * (1.0 / 10 + 1.0 / 20 + 1.0 / 30 + 1.0 / 40).squareRoot()
        #expect(abs(plain.ci95.lower - exp(log(400.0 / 600.0) - spread)) < 1e-12)
        #expect(abs(plain.ci95.upper - exp(log(400.0 / 600.0) + spread)) < 1e-12)
        let zero = TwoByTwo(a: 0, b: 5, c: 12, d: 3).oddsRatio
        #expect(abs(zero.value - (0.5 * 3.5) / (5.5 * 12.5)) < 1e-12)
    }

    @Test("the other outputs show the most significant drivers of each direction: many strong ones one way never hide the other")
    func significantDriversOfBothDirections() {
        var diagnostics = DropOffDiagnostics(funnel: Self.funnel, tally: FunnelTally(funnel: Self.funnel), counts: DropOffCounts())
        func driver(_ value: String, _ ratio: Double, p: Double, q: Double) -> DropOffDiagnostics.Driver {
            DropOffDiagnostics.Driver(
                from: 1, to: 2, kind: .event, dimension: nil, value: value, table: TwoByTwo(a: 20, b: 20, c: 20, d: 20),
                oddsRatio: ratio, ci95: ConfidenceInterval(lower: ratio, upper: ratio), pValue: p, qValue: q)
        }
        let less = (0..<15).map { driver("less \($0)", 0.2, p: 1e-10 * Double($0 + 1), q: 1e-8) }
        diagnostics.drivers = less + [driver("more", 3, p: 1e-3, q: 0.01), driver("weak", 3, p: 0.2, q: 0.3)]
        let shown = diagnostics.significantDrivers()
        #expect(shown.map(\.value) == (0..<10).map { "less \($0)" } + ["more"])
        #expect(diagnostics.significantDrivers(limit: 2).map(\.value) == ["less 0", "less 1", "more"])
    }

    // MARK: Per-person facts

    static let funnel = linearFunnel(["start", "phone", "otp", "done"], window: 3600)

    func facts(_ events: [FunnelEvent], funnel: Funnel = Self.funnel) -> (PersonOutcome, DropOffFacts?) {
        let outcome = FunnelEvaluator.evaluate(distinctEvents: events, funnel: funnel, now: base + 1_000_000 * second)
        return (outcome, DropOffFacts.of(outcome, in: funnel, shape: DropOffFacts.Shape(funnel), events: events))
    }

    @Test("dropped at a step: lingering to the last event in the window, the first other label next, labels to the window's end")
    func droppedPerson() throws {
        let (outcome, facts) = facts([
            track("start", at: 0), track("phone", at: 100), track("phone", at: 130),  // the step again: not "next"
            track("otp_failed", at: 160), track("help", at: 160), track("otp_failed", at: 400),
            FunnelEvent(messageId: "i", kind: .identify, name: nil, timestamp: base + 500 * second),
            track("late", at: 3601),  // past the window (t1 + 3600)
        ])
        #expect(outcome.level == 2)
        let f = try #require(facts)
        #expect(f.lingering == 400 * second)  // to the identify at 500
        #expect(f.nextLabel == "help")  // two at 160: the least label first
        #expect(f.labels == [.init(stepIndex: 1, label: "help"), .init(stepIndex: 1, label: "identify"), .init(stepIndex: 1, label: "otp_failed")])
    }

    @Test("converters' labels fall strictly between the two steps of each transition; completers have no lingering")
    func completer() throws {
        let (outcome, facts) = facts([
            track("start", at: 0), track("tour", at: 0), track("tour", at: 10), track("phone", at: 20), track("otp_failed", at: 20),
            track("otp_failed", at: 30), track("otp", at: 40), track("done", at: 50), track("after", at: 60),
        ])
        #expect(outcome.completed)
        let f = try #require(facts)
        #expect(f.lingering == nil && f.nextLabel == nil)
        #expect(f.labels == [.init(stepIndex: 0, label: "tour"), .init(stepIndex: 1, label: "otp_failed")])
    }

    @Test("nothing after the step: lingering 0, no next event; excluded persons and those never at step 1 have no facts")
    func edges() throws {
        let (_, alone) = facts([track("start", at: 0), track("phone", at: 100)])
        #expect(alone?.lingering == 0 && alone?.nextLabel == nil && alone?.labels == [])
        #expect(facts([track("phone", at: 0)]).1 == nil)
        var excluding = Self.funnel
        excluding.exclusions = [.event("refund")]
        #expect(facts([track("start", at: 0), track("refund", at: 5), track("phone", at: 10)], funnel: excluding).1 == nil)
    }
}
