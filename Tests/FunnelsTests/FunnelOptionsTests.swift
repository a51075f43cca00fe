import Testing
@testable import Funnels

/// The funnel options as docs/funnels.md states them: their configuration
/// (and the errors naming file, funnel and field) and its worked examples.
@Suite struct FunnelOptionsTests {
    static func parse(_ body: String) throws -> Funnel {
        let yaml = "apps:\n  - name: ops\nfunnels:\n  - name: f\n    app: ops\n" + body
        let configuration = try FunnelConfiguration.parse(yaml: yaml, source: "funnels.yaml")
        guard let funnel = configuration.funnels.first else { throw ConfigurationError(source: "funnels.yaml", message: "no funnel") }
        return funnel
    }

    static func error(_ body: String) -> String {
        do {
            _ = try parse(body)
            return "no error"
        } catch {
            return "\(error)"
        }
    }

    @Test func parsesEveryOption() throws {
        let funnel = try Self.parse("""
                order: strict
                ignore: [{event: heartbeat}]
                hold: [context.device.id]
                attribution: {step: 2}
                steps:
                  - event: a
                  - {event: b, within: 2m}
                  - event: c
                exclude:
                  - {event: x, where: {properties.reason: expired}, between: [2, 3]}
                  - event: y
            """)
        #expect(funnel.order == .strict)
        #expect(funnel.ignore == [.event("heartbeat")])
        #expect(funnel.hold == ["context.device.id"])
        #expect(funnel.attribution == .step(1))
        #expect(funnel.steps.map(\.within) == [nil, 120, nil])
        #expect(funnel.exclusions == [Exclusion(.event("x", where: ["properties.reason": "expired"]), between: 1...2), .event("y")])
        #expect(funnel.referencedPaths.isSuperset(of: ["context.device.id", "properties.reason"]))
        #expect(!funnel.isPlainWindowFunnel)
        #expect(funnel.optionWords == [
            "strict order (ignoring heartbeat)", "b within 2m of the previous step", "held constant: context.device.id",
            "breakdowns from step 2 (b)", "excluded: x between steps 2 and 3",
        ])
        let plain = try Self.parse("    steps: [{event: a}, {event: b}]\n")
        #expect(plain.isPlainWindowFunnel && plain.optionWords.isEmpty && plain.attribution == .firstStep && plain.order == .ordered)
        #expect(try Self.parse("    attribution: last_step\n    steps: [{event: a}]\n").attribution == .lastStep)
    }

    @Test func badOptionsNameTheField() {
        let prefix = "funnels.yaml: funnel 'f', "
        #expect(Self.error("    order: random\n    steps: [{event: a}]\n") == prefix + "order: expected ordered, strict or any (got 'random')")
        #expect(Self.error("    ignore: [{event: hb}]\n    steps: [{event: a}]\n") == prefix + "ignore: only applies with order: strict")
        #expect(Self.error("    steps: [{event: a, within: 2m}, {event: b}]\n")
            == prefix + "steps[0].within: the first step has no previous step to be within")
        #expect(Self.error("    steps: [{event: a}, {event: b, within: soon}]\n")
            == prefix + "steps[1].within: cannot parse 'soon' (expected e.g. 2m, 90s, 1h or whole seconds)")
        #expect(Self.error("    steps: [{event: a}, {event: b, optional: true, within: 1m}, {event: c}]\n")
            == prefix + "steps[1].within: an optional step takes no within (it is measured between required steps)")
        #expect(Self.error("    hold: []\n    steps: [{event: a}]\n")
            == prefix + "hold: must list at least one path (leave it out to hold nothing)")
        #expect(Self.error("    hold: [context..id]\n    steps: [{event: a}]\n")
            == prefix + "hold[0]: 'context..id' is not a path under properties., context. or traits. (such as context.os.name)")
        #expect(Self.error("    hold: [device.id]\n    steps: [{event: a}]\n")
            == prefix + "hold[0]: 'device.id' is not a path under properties., context. or traits. (such as context.os.name)")
        #expect(Self.error("    breakdowns: [context.os.name, os.name]\n    steps: [{event: a}]\n")
            == prefix + "breakdowns[1]: 'os.name' is not a path under properties., context. or traits. (such as context.os.name), nor audience:NAME")
        #expect(Self.error("    steps: [{event: a, where: {page: 1}}]\n")
            == prefix + "steps[0].where: 'page' is not a path under properties., context. or traits. (such as context.os.name)")
        #expect(Self.error("    order: any\n    steps: [{event: a}, {event: b}]\n    targets: [{metric: conversion, from: a, to: b, threshold: 0.5}]\n")
            == prefix + "targets[0]: a conversion between named steps does not apply with order: any (its rows count steps done, whichever)")
        #expect(Self.error("    attribution: middle\n    steps: [{event: a}]\n")
            == prefix + "attribution: expected first_step, last_step or {step: N} (got 'middle')")
        #expect(Self.error("    attribution: {step: 3}\n    steps: [{event: a}, {event: b}]\n")
            == prefix + "attribution.step: expected a step number from 1 to 2 (got 3.0)")
        #expect(Self.error("    steps: [{event: a}, {event: b}]\n    exclude: [{event: x, between: [2, 1]}]\n")
            == prefix + "exclude[0].between: the first step must come before the second")
        #expect(Self.error("    steps: [{event: a}, {event: b}]\n    exclude: [{event: x, between: [1]}]\n")
            == prefix + "exclude[0].between: expected two step numbers such as [2, 3] (got 1)")
        #expect(Self.error("    steps: [{event: a}, {event: o, optional: true}, {event: b}]\n    exclude: [{event: x, between: [1, 2]}]\n")
            == prefix + "exclude[0].between[1]: step 2 is optional; exclusions are bounded by required steps")
        for (body, field) in [
            ("    steps: [{event: a}, {event: b, within: 1m}]\n", "steps[1].within"),
            ("    steps: [{event: a}, {event: o, optional: true}, {event: b}]\n", "steps[1].optional"),
            ("    steps: [{event: a}, {event: b}]\n    exclude: [{event: x, between: [1, 2]}]\n", "exclude[0].between"),
            ("    attribution: {step: 1}\n    steps: [{event: a}, {event: b}]\n", "attribution"),
        ] {
            #expect(Self.error("    order: any\n" + body).hasPrefix(prefix + field + ": "), "\(field)")
            #expect(Self.error("    order: any\n" + body).hasSuffix("does not apply with order: any"), "\(field)")
        }
    }

    static func event(_ name: String, _ second: Int64, id: String? = nil, _ attributes: [String: String] = [:]) -> FunnelEvent {
        FunnelEvent(messageId: id ?? "\(name)@\(second)", kind: .track, name: name, timestamp: second * 1_000_000, attributes: attributes)
    }

    static func funnel(_ names: [String], window: Int64 = 86_400, _ edit: (inout Funnel) -> Void = { _ in }) -> Funnel {
        var funnel = Funnel(name: "f", app: "x", windowSeconds: window, steps: names.map { FunnelStep(.event($0)) })
        edit(&funnel)
        return funnel
    }

    static func level(_ funnel: Funnel, _ events: [FunnelEvent]) -> Int {
        FunnelEvaluator.evaluate(events: events, funnel: funnel, now: Int64.max).level
    }

    @Test("docs/funnels.md, Step order: strict")
    func strictExamples() {
        let strict = Self.funnel(["A", "B", "C"]) { $0.order = .strict }
        #expect(Self.level(strict, [Self.event("A", 1), Self.event("B", 2), Self.event("B", 3), Self.event("C", 4)]) == 2)
        #expect(Self.level(strict, [Self.event("A", 1), Self.event("B", 2), Self.event("A", 3), Self.event("B", 4), Self.event("C", 5)]) == 3)
        let heartbeat = [Self.event("A", 1), Self.event("heartbeat", 2), Self.event("B", 3), Self.event("C", 4)]
        #expect(Self.level(strict, heartbeat) == 1)
        #expect(Self.level(Self.funnel(["A", "B", "C"]) { $0.order = .strict; $0.ignore = [.event("heartbeat")] }, heartbeat) == 3)
        // An event at the same time as a step is not between.
        #expect(Self.level(strict, [Self.event("A", 1), Self.event("other", 1), Self.event("B", 2), Self.event("other", 2), Self.event("C", 2)]) == 3)
        // Ordered, the same person completes.
        #expect(Self.level(Self.funnel(["A", "B", "C"]), [Self.event("A", 1), Self.event("B", 2), Self.event("B", 3), Self.event("C", 4)]) == 3)
    }

    @Test("docs/funnels.md, Step order: any")
    func anyExample() {
        let any = Self.funnel(["welcome", "photo", "bio", "interests"]) { $0.order = .any }
        let outcome = FunnelEvaluator.evaluate(
            events: [Self.event("welcome", 10), Self.event("interests", 20), Self.event("photo", 30)], funnel: any, now: Int64.max)
        #expect(outcome.level == 3 && !outcome.completed)
        // Row k's time is the k-th step done: welcome, then interests, then photo.
        #expect(outcome.stepTimes == [10_000_000, 20_000_000, 30_000_000, nil])
        // Before step 1 does not count; one event does one step.
        #expect(Self.level(any, [Self.event("photo", 1), Self.event("welcome", 2), Self.event("bio", 3)]) == 2)
        let complete = FunnelEvaluator.evaluate(
            events: [Self.event("welcome", 0), Self.event("welcome", 50), Self.event("bio", 60), Self.event("interests", 70), Self.event("photo", 80)],
            funnel: any, now: Int64.max)
        #expect(complete.completed && complete.chainStartTime == 50_000_000 && complete.microsecondsToComplete == 30_000_000)
    }

    @Test("docs/funnels.md, A window per step")
    func withinExample() {
        let quick = Self.funnel(["phone_entered", "otp_verified"]) { $0.steps[1].within = 120 }
        let nine = Int64(9 * 3_600)
        #expect(Self.level(quick, [Self.event("phone_entered", nine), Self.event("phone_entered", nine + 600), Self.event("otp_verified", nine + 660)]) == 2)
        #expect(Self.level(quick, [Self.event("phone_entered", nine), Self.event("otp_verified", nine + 660)]) == 1)
        let outcome = FunnelEvaluator.evaluate(
            events: [Self.event("phone_entered", nine), Self.event("phone_entered", nine + 600), Self.event("otp_verified", nine + 660)],
            funnel: quick, now: Int64.max)
        #expect(outcome.chainStartTime == (nine + 600) * 1_000_000 && outcome.microsecondsToComplete == 60_000_000)
    }

    @Test("docs/funnels.md, Hold a property constant")
    func holdExample() {
        let held = Self.funnel(["welcome", "signup"]) { $0.hold = ["context.device.id"] }
        let phone = ["context.device.id": "phone"], tablet = ["context.device.id": "tablet"]
        #expect(Self.level(held, [Self.event("welcome", 1, phone), Self.event("signup", 2, tablet)]) == 1)
        #expect(Self.level(held, [
            Self.event("welcome", 1, phone), Self.event("signup", 2, tablet), Self.event("welcome", 3, tablet), Self.event("signup", 4, tablet),
        ]) == 2)
        // A step event without the held path is on no chain, nor a start.
        let outcome = FunnelEvaluator.evaluate(events: [Self.event("welcome", 1), Self.event("welcome", 5, phone)], funnel: held, now: Int64.max)
        #expect(outcome.startTime == 5_000_000)
    }

    @Test("docs/funnels.md, Which values a breakdown takes")
    func attributionExample() {
        let events = [
            Self.event("a", 1, ["context.app.version": "2.3"]), Self.event("b", 2, ["context.app.version": "2.4"]),
            Self.event("c", 3, ["context.app.version": "2.5"]),
        ]
        func version(_ attribution: Funnel.Attribution, _ history: [FunnelEvent]) -> String? {
            let funnel = Self.funnel(["a", "b", "c", "d"]) { $0.attribution = attribution; $0.breakdowns = ["context.app.version"] }
            return FunnelEvaluator.evaluate(events: history, funnel: funnel, now: Int64.max).breakdown["context.app.version"]
        }
        #expect(version(.firstStep, events) == "2.3")
        #expect(version(.lastStep, events) == "2.5")
        #expect(version(.step(1), events) == "2.4")
        #expect(version(.step(3), events) == PersonOutcome.missingBreakdownValue)
        #expect(version(.lastStep, [Self.event("a", 1, ["context.app.version": "2.3"]), Self.event("b", 2)]) == PersonOutcome.missingBreakdownValue)
    }

    @Test("docs/funnels.md, Exclusions between chosen steps")
    func betweenExample() {
        let funnel = Self.funnel(["a", "b", "c"]) { $0.exclusions = [Exclusion(.event("x"), between: 1...2)] }
        func excluded(_ events: [FunnelEvent]) -> Bool { FunnelEvaluator.evaluate(events: events, funnel: funnel, now: Int64.max).excluded }
        #expect(!excluded([Self.event("a", 1), Self.event("x", 2), Self.event("b", 3), Self.event("c", 5)]))
        #expect(excluded([Self.event("a", 1), Self.event("b", 3), Self.event("x", 4), Self.event("c", 5)]))
        #expect(excluded([Self.event("a", 1), Self.event("b", 3), Self.event("x", 3)]))  // not at c: to the last reached
        #expect(!excluded([Self.event("a", 1), Self.event("x", 2)]))  // never reached step 2
        #expect(!excluded([Self.event("a", 1), Self.event("b", 3), Self.event("c", 5), Self.event("x", 6)]))
    }

    @Test("a batch stored at one receive time: hundreds of same-time step events fill the steps by matching, as the plain sweep does")
    func sameTimeBatch() {
        let names = ["a", "b", "c", "d", "e", "f"]
        var events: [FunnelEvent] = [Self.event("a", 0)]
        for copy in 0..<60 {
            for name in names { events.append(Self.event(name, 100, id: "\(name)-\(copy)", ["context.device.id": "phone"])) }
        }
        let plain = FunnelEvaluator.evaluate(events: events, funnel: Self.funnel(names), now: Int64.max)
        for option in [Self.funnel(names) { $0.hold = ["context.device.id"] }, Self.funnel(names) { $0.steps[5].within = 60 },
                       Self.funnel(names) { $0.order = .strict }, Self.funnel(names) { $0.order = .any }] {
            let outcome = FunnelEvaluator.evaluate(events: events, funnel: option, now: Int64.max)
            #expect(outcome.completed && outcome.chainStartTime == 100_000_000 && outcome.completionTime == 100_000_000)
        }
        #expect(plain.completed && plain.chainStartTime == 100_000_000)
    }

    @Test("of chains with the same start, the earliest times are reported, whatever the events' order at a shared time")
    func earliestTimesWin() {
        // Two devices start at the same instant; the tablet reaches b first.
        let phone = ["context.device.id": "phone"], tablet = ["context.device.id": "tablet"]
        let held = Self.funnel(["a", "b", "c"]) { $0.hold = ["context.device.id"]; $0.attribution = .lastStep; $0.breakdowns = ["context.device.id"] }
        let devices = [
            Self.event("a", 0, id: "m1", phone), Self.event("a", 0, id: "m2", tablet), Self.event("b", 5, id: "m3", tablet),
            Self.event("b", 6, id: "m4", phone), Self.event("c", 9, id: "m5", phone), Self.event("c", 9, id: "m6", tablet),
        ]
        let outcome = FunnelEvaluator.evaluate(events: devices, funnel: held, now: Int64.max)
        #expect(outcome.stepTimes == [0, 5_000_000, 9_000_000] && outcome.breakdown["context.device.id"] == "tablet")
        // The same under any order: the tablet's b at 5.
        var any = held
        any.order = .any
        any.attribution = .firstStep
        #expect(FunnelEvaluator.evaluate(events: devices, funnel: any, now: Int64.max).stepTimes == [0, 5_000_000, 9_000_000])
        // Same-time steps filled by a matching, then a later event for step 2: the earlier chain's times stand.
        var plain = Funnel(name: "f", app: "x", steps: [
            FunnelStep(.event("a")), FunnelStep(.event("a", where: ["properties.x": "0"])), FunnelStep(.event("b")),
        ])
        plain.breakdowns = []
        let events = [
            FunnelEvent(messageId: "m1", kind: .track, name: "a", timestamp: 10_000_000, attributes: ["properties.x": "0"]),
            FunnelEvent(messageId: "m2", kind: .track, name: "a", timestamp: 10_000_000, attributes: ["properties.x": "1"]),
            FunnelEvent(messageId: "m3", kind: .track, name: "a", timestamp: 20_000_000, attributes: ["properties.x": "0"]),
            FunnelEvent(messageId: "m4", kind: .track, name: "b", timestamp: 30_000_000, attributes: [:]),
        ]
        let expected = FunnelEvaluator.evaluate(events: events, funnel: plain, now: Int64.max)
        #expect(expected.stepTimes == [10_000_000, 10_000_000, 30_000_000])
        var within = plain
        within.steps[2].within = 3_600
        var holding = plain
        holding.hold = ["properties.y"]
        let withY = events.map { event in
            var event = event
            event.attributes["properties.y"] = "1"
            return event
        }
        #expect(FunnelEvaluator.evaluate(events: events, funnel: within, now: Int64.max).stepTimes == expected.stepTimes)
        #expect(FunnelEvaluator.evaluate(events: withY, funnel: holding, now: Int64.max).stepTimes == expected.stepTimes)
    }
}
