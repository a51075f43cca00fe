import Foundation
import Funnels

/// How the renderers and the notification word a regression or an
/// improvement: one line a team can act on without opening the dashboard.
enum RegressionText {
    /// `conversion to otp_verified`, `completion rate`, `median time to complete`.
    static func metric(_ c: MetricChange) -> String {
        switch c.metric {
        case .conversionFromPrevious: "conversion to \(c.step ?? "?")"
        case .completionRate: "completion rate"
        case .medianSecondsToComplete: "median time to complete"
        }
    }

    /// `version 2.3.0 → 2.4.0` or `days 2026-10-20…2026-11-16 → 2026-11-17…2026-11-23`.
    static func comparison(_ c: MetricChange) -> String {
        "\(c.kind == .version ? "version" : "days") \(c.baseline.label) → \(c.recent.label)"
    }

    /// A side's value: a rate as a percentage, the median as a duration.
    static func value(_ side: MetricChange.Side, of c: MetricChange) -> String {
        c.metric == .medianSecondsToComplete ? Formatting.duration(side.value) : Formatting.percent(side.value)
    }

    /// `−7.7 points` or `+26 %`.
    static func difference(_ c: MetricChange) -> String {
        if c.metric == .medianSecondsToComplete {
            guard let base = c.baseline.value, base > 0 else { return Formatting.duration(abs(c.difference)) }
            return String(format: "%+.0f %%", c.difference / base * 100).replacing("-", with: "−")
        }
        return String(format: "%+.1f points", c.difference * 100).replacing("-", with: "−")
    }

    /// `yoked_onboarding: conversion to otp_verified 94.8% → 87.1% (−7.7 points), version 2.3.0 → 2.4.0, 3,455 vs 1,020 persons, q 3.2e-09`
    static func line(_ c: MetricChange) -> String {
        "\(c.funnel): \(metric(c)) \(value(c.baseline, of: c)) → \(value(c.recent, of: c)) (\(difference(c))), "
            + "\(comparison(c)), \(c.baseline.persons) vs \(c.recent.persons) persons, q \(DiagnosticsText.pValue(c.qValue))"
            + (c.likelyInstrumentation == nil ? "" : " (likely instrumentation)")
    }

    /// The block every text output opens with: regressions, then improvements, then instrumentation findings.
    static func block(_ reports: [FunnelReport], bullet: String, heading: (String) -> String) -> String {
        let (regressions, improvements) = all(reports)
        let instrumentation = InstrumentationText.block(reports, bullet: bullet, heading: heading)
        guard !regressions.isEmpty || !improvements.isEmpty else { return heading("Regressions: none found") + "\n" + instrumentation }
        var out = ""
        for (title, changes) in [("Regressions", regressions), ("Improvements", improvements)] where !changes.isEmpty {
            out += heading("\(title) (\(changes.count))") + "\n" + changes.map { bullet + line($0) + "\n" }.joined()
        }
        return out + instrumentation
    }

    /// Every report's regressions, then every report's improvements.
    static func all(_ reports: [FunnelReport]) -> (regressions: [MetricChange], improvements: [MetricChange]) {
        (reports.flatMap(\.regressions.regressions), reports.flatMap(\.regressions.improvements))
    }
}
