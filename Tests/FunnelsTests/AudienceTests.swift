import Foundation
import TestSupport
import Testing
@testable import Funnels

/// Audiences in the configuration (docs/audiences.md), and when a unit is in
/// one from a clock on (`AudienceSpans`), against a direct evaluation at
/// each instant: the funnel evaluated again at that clock, the events counted.
@Suite struct AudienceTests {
    static let funnels = """
        apps:
          - name: yoked
          - name: ops
        funnels:
          - name: signup
            app: yoked
            window: 24h
            steps:
              - event: started
              - event: phone_entered
              - {event: tip_viewed, optional: true}
              - event: otp_verified
          - name: companies
            app: ops
            aggregate_by: group
            window: 3d
            steps:
              - screen: companySetup
              - screen: welcome
        """

    static func configuration(_ audiences: String) throws -> FunnelConfiguration {
        try FunnelConfiguration.parse(yaml: funnels + "\naudiences:\n" + audiences, source: "audiences.yaml")
    }

    static func error(_ audiences: String) -> String {
        do {
            _ = try configuration(audiences)
            return "no error"
        } catch {
            return "\(error)"
        }
    }

    @Test("funnel, behaviour and combined audiences are read, references resolved, app and unit found")
    func parses() throws {
        let config = try Self.configuration("""
              - name: stuck_at_otp
                funnel: signup
                stalled: {step: 2, for: 1h}
                days: 7
                deliver: {url: "https://hooks.example.com/onramp", on: [enter], traits: [traits.email]}
              - name: completed
                funnel: signup
                outcome: completed
              - name: asked_for_help
                app: yoked
                did: {event: help_opened, times: 2, within: 12h}
              - name: stuck_alone
                all_of:
                  - audience: stuck_at_otp
                  - not: {audience: asked_for_help}
              - name: companies_stalled
                funnel: companies
                outcome: dropped
                step: 1
            """)
        #expect(config.audiences.map(\.name) == ["stuck_at_otp", "completed", "asked_for_help", "stuck_alone", "companies_stalled"])
        let stuck = try #require(config.audience(named: "stuck_at_otp"))
        #expect(stuck.app == "yoked")
        #expect(stuck.aggregateBy == .person)
        #expect(stuck.delivery?.on == [.enter])
        #expect(stuck.delivery?.traits == ["traits.email"])
        #expect(AudienceDefinition.text(of: stuck) == "persons of yoked: funnel signup: stalled at step 2 for 1h, cohort days of the last 7 (UTC)")
        let alone = try #require(config.audience(named: "stuck_alone"))
        #expect(alone.app == "yoked")
        #expect(AudienceDefinition.text(of: alone.condition)
                == "all of (funnel signup: stalled at step 2 for 1h, cohort days of the last 7 (UTC); not (did event help_opened at least 2 times within 12h))")
        #expect(config.audience(named: "companies_stalled")?.aggregateBy == .group)
        // Behaviour events count as events that may change what the job stores.
        let outcomes = OutcomeEvents(funnels: config.funnels(forApp: "yoked"), audiences: config.audiences(forApp: "yoked"))
        #expect(outcomes.mayChangeOutcome(kind: .track, name: "help_opened"))
        #expect(!outcomes.mayChangeOutcome(kind: .track, name: "settings_opened"))
        // The fingerprint follows the definition.
        var edited = stuck
        edited.condition = .funnel(FunnelStanding(
            funnel: try #require(config.funnel(named: "signup")), outcome: .stalled(seconds: 7200), step: 2, days: 7))
        #expect(AudienceDefinition.fingerprint(of: edited) != AudienceDefinition.fingerprint(of: stuck))
    }

    @Test("bad audiences are refused naming the file, the audience and the field", arguments: [
        ("- {name: a, funnel: nope, outcome: completed}",
         "audiences.yaml: audience 'a', funnel: unknown funnel 'nope' (funnels are 'signup', 'companies')"),
        ("- {name: a, funnel: signup, outcome: dropped, step: 9}",
         "audiences.yaml: audience 'a', step: step 9 is out of range (the funnel's rows are 1 to 4)"),
        ("- {name: a, funnel: signup, outcome: dropped, step: 3}",
         "audiences.yaml: audience 'a', step: dropped:3: step 3 is optional, only reached:3 lists its persons"),
        ("- {name: a, funnel: signup, outcome: dropped, step: 4}",
         "audiences.yaml: audience 'a', step: step 4 is the last required step: no one is stuck there"),
        ("- {name: a, funnel: signup, stalled: {step: 2, for: 2d}}",
         "audiences.yaml: audience 'a', stalled.for: 2d is not shorter than the funnel's window (24h): no one is still in progress by then"),
        ("- {name: a, funnel: signup, outcome: finished}",
         "audiences.yaml: audience 'a', outcome: expected reached, converted, dropped, in_progress or completed (got 'finished')"),
        ("- {name: a, audience: b}\n  - {name: b, audience: a}",
         "audiences.yaml: audience 'a', audience: audiences refer to each other in a cycle: a → b → a"),
        ("- {name: a, audience: nobody}",
         "audiences.yaml: audience 'a', audience: unknown audience 'nobody' (audiences are 'a')"),
        ("- {name: a, did: {event: x}}",
         "audiences.yaml: audience 'a', app: missing: an audience of behaviour alone names its app"),
        ("- {name: a, any_of: [{funnel: signup, outcome: completed}, {funnel: companies, outcome: completed}]}",
         "audiences.yaml: audience 'a': its operands are of apps 'yoked' and 'ops': an audience is of one app"),
        ("- {name: a, app: ops, aggregate_by: person, funnel: companies, outcome: completed}",
         "audiences.yaml: audience 'a', aggregate_by: is person, but its funnels count groups"),
        ("- {name: a, funnel: signup, outcome: completed, deliver: {url: 'ftp://x.example'}}",
         "audiences.yaml: audience 'a', deliver.url: expected an http:// or https:// URL with a host"),
        ("- {name: a, funnel: signup, outcome: completed, deliver: {url: 'https://'}}",
         "audiences.yaml: audience 'a', deliver.url: expected an http:// or https:// URL with a host"),
        ("- {name: a, funnel: signup, did: {event: x}}",
         "audiences.yaml: audience 'a': expected exactly one of funnel, did, did_not, all_of, any_of, not or audience (got funnel and did)"),
        ("- {name: a, app: yoked, did: {event: x, within: soon}}",
         "audiences.yaml: audience 'a', did.within: cannot parse 'soon' (expected e.g. 12h, 7d or whole seconds; leave it out for ever)"),
        ("- {name: a, funnel: signup, outcome: completed}\n  - {name: a, funnel: signup, outcome: completed}",
         "audiences.yaml: audience 'a', name: duplicate audience name"),
    ])
    func refused(_ yaml: String, _ expected: String) {
        #expect(Self.error("  " + yaml) == expected)
    }

    /// `funnels` with `signup` broken down by `breakdowns`, and two audiences.
    static func brokenDown(_ breakdowns: String) -> String {
        do {
            _ = try FunnelConfiguration.parse(
                yaml: funnels.replacingOccurrences(of: "    window: 24h\n", with: "    window: 24h\n    breakdowns: \(breakdowns)\n") + """

                    audiences:
                      - {name: stuck, funnel: signup, stalled: {step: 2, for: 1h}}
                      - {name: quiet_companies, funnel: companies, outcome: dropped, step: 1}
                    """, source: "audiences.yaml")
            return "no error"
        } catch {
            return "\(error)"
        }
    }

    @Test("a funnel is broken down by an audience of its app counting what it counts; any other is refused naming the funnel and the field", arguments: [
        ("[audience:stuck, context.os.name]", "no error"),
        ("[audience:nobody]",
         "audiences.yaml: funnel 'signup', breakdowns[0]: unknown audience 'nobody' (audiences of app 'yoked' are 'stuck')"),
        ("[context.os.name, audience:quiet_companies]",
         "audiences.yaml: funnel 'signup', breakdowns[1]: audience 'quiet_companies' is of app 'ops', the funnel of app 'yoked'"),
        ("['audience:']",
         "audiences.yaml: funnel 'signup', breakdowns[0]: 'audience:' is not a path under properties., context. or traits. (such as context.os.name), nor audience:NAME"),
    ])
    func breakdownByAudience(_ breakdowns: String, _ expected: String) {
        #expect(Self.brokenDown(breakdowns) == expected)
    }

    @Test("an audience breakdown is not an event path, and the engine leaves its value to whoever knows the members")
    func audienceBreakdownIsNoPath() throws {
        let yaml = Self.funnels.replacingOccurrences(of: "    window: 24h\n", with: "    window: 24h\n    breakdowns: [audience:stuck]\n")
            + "\naudiences:\n  - {name: stuck, funnel: signup, stalled: {step: 2, for: 1h}}\n"
        let signup = try #require(try FunnelConfiguration.parse(yaml: yaml, source: "a.yaml").funnel(named: "signup"))
        #expect(signup.audienceBreakdowns == ["stuck"])
        #expect(!signup.referencedPaths.contains("audience:stuck"))
        var outcome = FunnelEvaluator.evaluate(
            distinctEvents: [FunnelEvent(messageId: "1", kind: .track, name: "started", timestamp: 0)], funnel: signup, now: 1)
        #expect(outcome.breakdown["audience:stuck"] == nil)
        outcome.setAudienceBreakdowns(of: signup) { $0 == "stuck" }
        #expect(outcome.breakdown["audience:stuck"] == "in")
    }

    // MARK: spans against the clock

    /// The audiences the property test draws from, over `signup`.
    static func audiences(_ config: FunnelConfiguration) throws -> [Audience] {
        try Self.configuration("""
              - {name: stalled, funnel: signup, stalled: {step: 2, for: 1h}}
              - {name: stalled_recent, funnel: signup, stalled: {step: 1, for: 30m}, days: 2}
              - {name: completed, funnel: signup, outcome: completed}
              - {name: dropped, funnel: signup, outcome: dropped, step: 2}
              - {name: in_progress, funnel: signup, outcome: in_progress, step: 1}
              - {name: reached_tip, funnel: signup, outcome: reached, step: 3}
              - {name: helped_twice, app: yoked, did: {event: help_opened, times: 2, within: 6h}}
              - {name: never_helped, app: yoked, did_not: {event: help_opened}}
              - {name: stalled_unhelped, all_of: [{audience: stalled}, {not: {did: {event: help_opened, within: 2h}}}]}
              - {name: either, any_of: [{audience: dropped}, {audience: helped_twice}]}
            """).audiences
    }

    @Test("the spans computed at a clock hold exactly when a direct evaluation at each later instant says so")
    func spansMatchDirectEvaluation() throws {
        let config = try Self.configuration("  - {name: x, funnel: signup, outcome: completed}")
        let audiences = try Self.audiences(config)
        let funnel = try #require(config.funnel(named: "signup"))
        let hour: Int64 = 3_600_000_000
        var rng = SplitMix(seed: 69)
        var evaluator = AudienceSpans()
        var checked = 0
        for person in 0..<400 {
            let now = base + Int64(rng.next() % 1000) * hour
            // Up to three days back: steps, the optional tip, help.
            var events: [FunnelEvent] = []
            for n in 0..<Int(rng.next() % 9) {
                let name = ["started", "phone_entered", "tip_viewed", "otp_verified", "help_opened", "help_opened"][Int(rng.next() % 6)]
                let at = now - Int64(rng.next() % (72 * 3600)) * 1_000_000
                events.append(FunnelEvent(messageId: "\(person)-\(n)", kind: .track, name: name, timestamp: at))
            }
            events.sort { $0.timestamp < $1.timestamp }
            var outcomes: [String: PersonOutcome] = [:]
            let outcome = FunnelEvaluator.evaluate(distinctEvents: events, funnel: funnel, now: now)
            if outcome.level > 0 || outcome.excluded { outcomes[funnel.name] = outcome }
            let unit = AudienceSpans.Unit(outcomes: outcomes, events: events)
            for audience in audiences {
                let spans = evaluator.spans(of: audience, unit: unit, now: now)
                #expect(spans.allSatisfy { span in span.enters >= now && (span.leaves.map { $0 > span.enters } ?? true) })
                var instants = (0..<12).map { _ in now + Int64(rng.next() % (80 * 3600)) * 1_000_000 } + [now]
                for span in spans { instants += [span.enters, span.enters - 1] + (span.leaves.map { [$0, $0 - 1] } ?? []) }
                for instant in instants where instant >= now {
                    let expected = AudienceReference.holds(audience.condition, events: events, at: instant)
                    #expect(spans.contains { $0.contains(instant) } == expected, "\(audience.name), person \(person), +\(instant - now)µs")
                    checked += 1
                }
            }
        }
        #expect(checked > 40_000)
    }
}
