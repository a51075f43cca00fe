import Foundation
import Testing
@testable import Funnels

@Suite struct FunnelConfigurationTests {
    @Test func defaultConfigurationHasTheSixFunnels() throws {
        let config = try FunnelConfiguration.default()
        #expect(config.apps.map(\.name) == ["yoked", "ops", "umuve", "forma"])
        #expect(config.funnels.map(\.name) == [
            "yoked_onboarding", "ops_company_creator", "ops_employee", "ops_companies", "umuve_onboarding", "forma_onboarding",
        ])
        #expect(config.funnels.allSatisfy { $0.windowSeconds == ($0.name == "ops_companies" ? 3 * 86_400 : 86_400) })
        // Ops' companies are counted by group: a creator's setup, then an employee's welcome.
        let companies = try #require(config.funnel(named: "ops_companies"))
        #expect(companies.aggregateBy == .group)
        #expect(companies.steps.map(\.name) == ["companySetup", "companyDetails", "companyCode", "welcome"])
        #expect(config.funnels.filter { $0.aggregateBy == .group }.map(\.name) == ["ops_companies"])
        #expect(config.reportTimeZone == "UTC")

        let yoked = try #require(config.funnel(named: "yoked_onboarding"))
        #expect(yoked.steps.count == 12)
        #expect(yoked.steps.first?.name == "onboarding_started")
        #expect(yoked.steps.last?.name == "onboarding_completed")
        #expect(yoked.breakdowns == ["context.os.name", "context.app.version"])
        #expect(yoked.targets == [
            FunnelTarget(name: "completion_rate", metric: .completionRate, bound: .atLeast(0.6)),
            FunnelTarget(name: "median_time_to_complete", metric: .medianSecondsToComplete, bound: .atMost(600)),
            FunnelTarget(name: "verification_success",
                         metric: .conversion(from: "verification_consent_given", to: "verification_completed"),
                         bound: .atLeast(0.9)),
        ])

        let creator = try #require(config.funnel(named: "ops_company_creator"))
        #expect(creator.steps.map(\.name) == [
            "welcome", "signup", "credentials", "profile", "companySetup", "companyDetails", "companyCode", "ready", "tutorial",
        ])
        #expect(creator.steps.allSatisfy { $0.matchers == [.screen($0.name, where: ["properties.flow": "company_creator"])] })

        let employee = try #require(config.funnel(named: "ops_employee"))
        #expect(employee.steps.map(\.name) == ["welcome", "signup", "credentials", "profile", "codeEntry", "ready", "tutorial"])
        #expect(employee.breakdowns == ["context.os.name", "context.app.version", "properties.auth_method", "properties.flow_version"])

        let umuve = try #require(config.funnel(named: "umuve_onboarding"))
        #expect(umuve.steps.map(\.name) == [
            "onboarding_screen_viewed", "onboarding_screen_viewed | onboarding_skipped",
            "apple_sign_in_completed", "main_screen_viewed",
        ])
        #expect(umuve.steps[1].matchers == [
            .event("onboarding_screen_viewed", where: ["properties.page": "3"]), .event("onboarding_skipped"),
        ])

        let forma = try #require(config.funnel(named: "forma_onboarding"))
        #expect(forma.steps.map(\.name) == [
            "onboarding_step_viewed (step=welcome)", "onboarding_step_viewed (step=folders)",
            "onboarding_step_viewed (step=quiz)", "onboarding_step_viewed (step=folderTemplates)",
            "onboarding_step_viewed (step=preview)", "onboarding_completed",
        ])

        #expect(config.referencedPaths == [
            "context.os.name", "context.app.version", "properties.auth_method", "properties.flow_version",
            "properties.flow", "properties.page", "properties.step",
        ])
        let app = try #require(config.app(named: "yoked"))
        #expect(app.piiProperties == ["phone", "email", "date_of_birth", "password"])
        #expect(app.piiMode == .remove)
        #expect(config.timeZoneIdentifier(for: yoked) == "UTC")
    }

    static let minimal = """
    apps:
      - name: ops
        pii_mode: hash
        pii_properties: [email]
        time_zone: Europe/Paris
    funnels:
      - name: f
        app: ops
        window: 30m
        breakdowns: [properties.flow_version]
        steps:
          - event: a
            where: {properties.page: 1, properties.ok: true}
          - name: Middle
            screen: b
            optional: true
          - any_of: [{event: c}, {screen: c, where: {properties.page: "3"}}]
        exclude: [{event: account_deleted, where: {properties.reason: spam}}]
        targets:
          - {metric: completion_rate, threshold: 0.5}
          - {name: a_to_c, metric: conversion, from: a, to: "c | c", min: 0.2}
    """

    @Test func parsesAllFields() throws {
        let config = try FunnelConfiguration.parse(yaml: Self.minimal, source: "funnels.yaml")
        let app = try #require(config.app(named: "ops"))
        #expect(app == AppConfiguration(name: "ops", piiProperties: ["email"], piiMode: .hash, timeZone: "Europe/Paris"))
        let funnel = try #require(config.funnel(named: "f"))
        #expect(funnel.windowSeconds == 1_800)
        #expect(funnel.steps.map(\.name) == ["a", "Middle", "c | c"])
        #expect(funnel.steps.map(\.isOptional) == [false, true, false])
        #expect(funnel.steps[0].matchers == [.event("a", where: ["properties.page": "1", "properties.ok": "true"])])
        #expect(funnel.exclusions == [.event("account_deleted", where: ["properties.reason": "spam"])])
        #expect(funnel.targets.map(\.name) == ["completion_rate", "a_to_c"])
        #expect(funnel.targets[1].bound == .atLeast(0.2))
        #expect(config.timeZoneIdentifier(for: funnel) == "Europe/Paris")
        #expect(config.referencedPaths == ["properties.flow_version", "properties.page", "properties.ok", "properties.reason"])

        // YAML `page: 1` matches the attribute "1".
        let event = FunnelEvent(messageId: "m", kind: .track, name: "a", timestamp: 0,
                                attributes: ["properties.page": "1", "properties.ok": "true"])
        #expect(funnel.steps[0].matches(event))
    }

    @Test(arguments: [
        ("24h", Int64(86_400)), ("30m", 1_800), ("90s", 90), ("2d", 172_800), ("3600", 3_600),
    ])
    func windowsParse(text: String, seconds: Int64) {
        #expect(WindowDuration.seconds(from: text) == seconds)
    }

    @Test(arguments: ["", "h", "-1h", "0", "1.5h", "24 hours", "1w", "99999999999999d"])
    func badWindowsDoNotParse(text: String) {
        #expect(WindowDuration.seconds(from: text) == nil)
    }

    static func error(_ yaml: String) -> String {
        do {
            _ = try FunnelConfiguration.parse(yaml: yaml, source: "funnels.yaml")
            return "no error"
        } catch {
            return error.description
        }
    }

    static func funnel(_ body: String, app: String = "ops") -> String {
        "apps:\n  - name: ops\nfunnels:\n  - name: ops_employee\n    app: \(app)\n" + body
    }

    @Test func errorsNameFileFunnelAndField() {
        #expect(Self.error(Self.funnel("""
            steps:
              - event: a
              - event: b
              - screen: c
                where: [properties.flow]
        """)) == "funnels.yaml: funnel 'ops_employee', steps[2].where: expected a mapping of path to value")

        #expect(Self.error(Self.funnel("""
            steps:
              - {event: a, optional: true}
              - event: b
        """)) == "funnels.yaml: funnel 'ops_employee', steps[0].optional: the first step cannot be optional")

        #expect(Self.error(Self.funnel("""
            steps:
              - event: a
              - event: b
            aggregate_by: company
        """)) == "funnels.yaml: funnel 'ops_employee', aggregate_by: expected person or group (got 'company')")

        #expect(Self.error(Self.funnel("""
            steps:
              - event: a
              - {event: b, optional: true}
        """)) == "funnels.yaml: funnel 'ops_employee', steps[1].optional: the last step cannot be optional")

        #expect(Self.error(Self.funnel("""
            steps:
              - event: a
            diagnostics: {min_support: 0}
        """)) == "funnels.yaml: funnel 'ops_employee', diagnostics.min_support: expected a whole number of persons, at least 1 (got 0.0)")
        #expect(Self.error(Self.funnel("""
            steps:
              - event: a
            diagnostics: {min_suport: 5}
        """)) == "funnels.yaml: funnel 'ops_employee', diagnostics.min_suport: unknown field (expected one of: min_support)")
        #expect((try? FunnelConfiguration.parse(yaml: Self.funnel("""
            steps:
              - event: a
            diagnostics: {min_support: 50}
        """), source: "funnels.yaml"))?.funnels.first?.minSupport == 50)

        #expect(Self.error(Self.funnel("""
            steps: [{event: a}]
            retention: {days: [1, 7, 7]}
        """)) == "funnels.yaml: funnel 'ops_employee', retention.days[2]: day 7 is listed twice")
        #expect(Self.error(Self.funnel("""
            steps: [{event: a}]
            retention: {days: [1, 2.5]}
        """)) == "funnels.yaml: funnel 'ops_employee', retention.days[1]: expected a whole number of days from 0 to 3650 (got 2.5)")
        #expect(Self.error(Self.funnel("""
            steps: [{event: a}]
            retention: {active_events: [{evnt: opened}]}
        """)).hasPrefix("funnels.yaml: funnel 'ops_employee', retention.active_events[0].evnt: unknown field"))
        let retention = (try? FunnelConfiguration.parse(yaml: Self.funnel("""
            steps: [{event: a}]
            retention: {days: [30, 0, 7], active_events: [{event: opened}, {screen: Home, where: {properties.tab: feed}}]}
        """), source: "funnels.yaml"))?.funnels.first?.retention
        #expect(retention?.days == [0, 7, 30])
        #expect(retention?.activeEvents == [.event("opened"), .screen("Home", where: ["properties.tab": "feed"])])
        #expect((try? FunnelConfiguration.parse(yaml: Self.funnel("    steps: [{event: a}]\n"), source: "f.yaml"))?.funnels.first?.retention.days == [1, 7, 30])

        #expect(Self.error(Self.funnel("    steps: []\n"))
            == "funnels.yaml: funnel 'ops_employee', steps: must list at least one step")

        #expect(Self.error(Self.funnel("""
            steps:
              - event: a
              - optional: false
        """)) == "funnels.yaml: funnel 'ops_employee', steps[1]: expected 'event', 'screen' or 'any_of'")

        #expect(Self.error(Self.funnel("""
            steps: [{event: a}]
            targets: [{metric: happiness, threshold: 1}]
        """)).hasPrefix("funnels.yaml: funnel 'ops_employee', targets[0].metric: unknown metric 'happiness'"))

        #expect(Self.error(Self.funnel("""
            steps: [{event: a}, {event: b}]
            targets: [{metric: conversion, from: a, to: z, threshold: 0.5}]
        """)) == "funnels.yaml: funnel 'ops_employee', targets[0].to: unknown step 'z' (steps are 'a', 'b')")

        #expect(Self.error(Self.funnel("    steps: [{event: a}]\n", app: "nope"))
            == "funnels.yaml: funnel 'ops_employee', app: app 'nope' is not declared under 'apps'")

        #expect(Self.error(Self.funnel("    window: soon\n    steps: [{event: a}]\n")).hasPrefix(
            "funnels.yaml: funnel 'ops_employee', window: cannot parse 'soon'"))

        #expect(Self.error(Self.funnel("    steps: [{event: a, wher: {x: 1}}]\n")).hasPrefix(
            "funnels.yaml: funnel 'ops_employee', steps[0].wher: unknown field"))

        #expect(Self.error("""
        apps: [{name: ops}]
        funnels:
          - {name: f, app: ops, steps: [{event: a}]}
          - {name: f, app: ops, steps: [{event: b}]}
        """) == "funnels.yaml: funnel 'f', name: duplicate funnel name")

        #expect(Self.error("apps: [{name: ops, time_zone: Mars/Base}]\nfunnels: []\n")
            == "funnels.yaml: app 'ops', time_zone: unknown time zone 'Mars/Base' (expected an IANA name such as Europe/Paris)")

        #expect(Self.error("funnels: [{app: ops, steps: [{event: a}]}]\n") == "funnels.yaml: funnels[0].name: missing")
        #expect(Self.error("funnels: {").hasPrefix("funnels.yaml: invalid YAML"))
    }

    @Test func loadNamesTheFile() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("onramp-funnels-\(UInt64.random(in: 0...UInt64.max)).yaml")
        try Self.funnel("    steps:\n      - event: a\n      - screen: b\n        where: 3\n").write(to: url, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: url) }
        do {
            _ = try FunnelConfiguration.load(contentsOf: url)
            Issue.record("expected an error")
        } catch {
            #expect(error.description == "\(url.path): funnel 'ops_employee', steps[1].where: expected a mapping of path to value")
        }
        let missing = URL(fileURLWithPath: "/nonexistent/funnels.yaml")
        #expect(throws: ConfigurationError.self) { try FunnelConfiguration.load(contentsOf: missing) }
    }

    @Test func stepNamesDisambiguateOnlyWhenNeeded() {
        let a1 = [EventMatcher.event("v", where: ["properties.step": "1"])]
        let a2 = [EventMatcher.event("v", where: ["properties.step": "2"])]
        let plain = [EventMatcher.event("w")]
        #expect(StepNaming.resolve(explicit: [nil, nil, nil], matchers: [a1, a2, plain]) == ["v (step=1)", "v (step=2)", "w"])
        #expect(StepNaming.resolve(explicit: [nil, nil], matchers: [plain, plain]) == ["w #1", "w #2"])
        #expect(StepNaming.resolve(explicit: ["v", nil], matchers: [plain, a1]) == ["v", "v (step=1)"])
    }
}
