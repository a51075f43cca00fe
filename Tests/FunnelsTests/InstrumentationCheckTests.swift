import Foundation
@testable import Funnels
import Testing

/// The instrumentation check on catalogues written by hand, each with the
/// one finding it was written to hold (docs/tracking-health.md).
@Suite struct InstrumentationCheckTests {
    /// ops_employee as shipped: screens filtered on `properties.flow`, broken down by `properties.auth_method`.
    static let funnel: Funnel = {
        guard let funnel = try? FunnelConfiguration.default().funnel(named: "ops_employee") else { fatalError("ops_employee is shipped") }
        return funnel
    }()

    /// Every step's screen in both versions on both platforms, 200 persons
    /// each, up to `newest`; `change` edits the rows first.
    static func catalog(newest: String = "2026-11-27", _ change: (inout [EventCatalogCounts.Total], inout [EventCatalogCounts.Path]) -> Void = { _, _ in })
        -> EventCatalogCounts
    {
        var totals: [EventCatalogCounts.Total] = []
        var paths: [EventCatalogCounts.Path] = []
        for step in funnel.steps {
            for matcher in step.matchers {
                for version in ["3.4.0", "3.5.0"] {
                    for os in ["iOS", "Android"] {
                        totals.append(.init(type: "screen", event: matcher.name, version: version, os: os, events: 300, personDays: 200, lastDay: newest))
                    }
                    paths.append(.init(type: "screen", event: matcher.name, version: version, path: "properties.flow", jsonType: "string", events: 600))
                    paths.append(.init(type: "screen", event: matcher.name, version: version, path: "properties.auth_method", jsonType: "string", events: 600))
                }
            }
        }
        change(&totals, &paths)
        let recent = ["2026-11-25", "2026-11-26", "2026-11-27"].map { EventCatalogCounts.Day(type: "screen", event: "welcome", day: $0, events: 90, persons: 60) }
        return EventCatalogCounts(totals: totals, recentDays: recent, paths: paths)
    }

    static func findings(_ catalog: EventCatalogCounts, versions: (String, String)? = ("3.4.0", "3.5.0")) -> [InstrumentationFinding] {
        InstrumentationCheck.findings(
            funnel: funnel, catalog: catalog, versions: versions.map { (older: $0.0, newest: $0.1) }, newestClosedDay: "2026-11-27", minPersons: 100)
    }

    @Test("a catalogue where both versions send everything has no finding")
    func healthy() {
        #expect(Self.findings(Self.catalog()).isEmpty)
    }

    @Test("3.5.0 sending no codeEntry at all: the event vanished, with the older version's events and the newest's starters")
    func vanished() throws {
        let found = Self.findings(Self.catalog { totals, _ in totals.removeAll { $0.event == "codeEntry" && $0.version == "3.5.0" } })
        #expect(found.count == 1)
        let finding = try #require(found.first)
        #expect(finding.kind == .eventVanished && finding.step == "codeEntry" && finding.labels == ["screen: codeEntry"])
        #expect(finding.baselineEvents == 600 && finding.recentStarters == 400)
        #expect(finding.baseline == "3.4.0" && finding.recent == "3.5.0")
    }

    @Test("3.5.0 on Android alone sending no signup: vanished on that platform only")
    func vanishedOnPlatform() throws {
        let found = Self.findings(Self.catalog { totals, _ in
            totals.removeAll { $0.event == "signup" && $0.version == "3.5.0" && $0.os == "Android" }
        })
        #expect(found.map(\.kind) == [.eventVanishedOnPlatform])
        #expect(found.first?.platform == "Android" && found.first?.baselineEvents == 300 && found.first?.recentStarters == 200)
    }

    @Test("no tutorial since 2026-11-20 while people start every day: a step unmatched for the last 3 closed days; not before 3 days")
    func unmatched() throws {
        func lastTutorial(_ day: String) -> EventCatalogCounts {
            Self.catalog { totals, _ in
                for index in totals.indices where totals[index].event == "tutorial" { totals[index].lastDay = day }
            }
        }
        let found = Self.findings(lastTutorial("2026-11-20"), versions: nil)
        #expect(found.map(\.kind) == [.stepUnmatched])
        #expect(found.first?.step == "tutorial" && found.first?.baseline == "2026-11-20" && found.first?.recentStarters == 180)
        #expect(Self.findings(lastTutorial("2026-11-25"), versions: nil).isEmpty)
    }

    @Test("a where's property missing in 3.5.0, and a breakdown's property turned from string to number")
    func properties() throws {
        let found = Self.findings(Self.catalog { _, paths in
            paths.removeAll { $0.event == "profile" && $0.version == "3.5.0" && $0.path == "properties.flow" }
            for index in paths.indices where paths[index].event == "welcome" && paths[index].version == "3.5.0" && paths[index].path == "properties.auth_method" {
                paths[index].jsonType = "number"
            }
        })
        #expect(Set(found.map(\.kind)) == [.propertyVanished, .propertyTypeChanged])
        let vanished = try #require(found.first { $0.kind == .propertyVanished })
        #expect(vanished.step == "profile" && vanished.path == "properties.flow" && vanished.baselineEvents == 600)
        let changed = try #require(found.first { $0.kind == .propertyTypeChanged })
        #expect(changed.step == "welcome" && changed.path == "properties.auth_method")
        #expect(changed.baselineType == "string" && changed.recentType == "number")
    }

    @Test("a regression at a step whose event vanished, and completion, are labelled; one at another step is not")
    func labels() throws {
        let found = Self.findings(Self.catalog { totals, _ in totals.removeAll { $0.event == "codeEntry" && $0.version == "3.5.0" } })
        func change(_ metric: MetricChange.Metric, _ step: String?) -> MetricChange {
            let side = MetricChange.Side(label: "x", value: 0.5, persons: 500, ci95: nil)
            return MetricChange(funnel: Self.funnel.name, kind: .version, metric: metric, step: step, baseline: side, recent: side, difference: -0.3, pValue: 0)
        }
        var regressions = RegressionFindings()
        regressions.regressions = [change(.conversionFromPrevious, "codeEntry"), change(.conversionFromPrevious, "profile"), change(.completionRate, nil)]
        InstrumentationCheck.label(&regressions, with: found)
        #expect(regressions.regressions.map { $0.likelyInstrumentation != nil } == [true, false, true])
    }
}
