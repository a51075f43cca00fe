import Foundation
import Funnels

/// How the text outputs (table, markdown, csv) name the parts of the drop-off
/// diagnostics, so they read alike.
enum DiagnosticsText {
    /// Next events shown per step in the text outputs.
    static let nextEventsShown = 3

    /// `phone_entered → otp_verified`
    static func transition(_ d: DropOffDiagnostics.Driver, in diagnostics: DropOffDiagnostics) -> String {
        "\(stepName(d.from, in: diagnostics)) → \(stepName(d.to, in: diagnostics))"
    }

    static func stepName(_ index: Int, in diagnostics: DropOffDiagnostics) -> String {
        diagnostics.steps.first { $0.index == index }?.name ?? "step \(index)"
    }

    /// `event otp_failed` or `context.os.name = Android`
    static func candidate(_ d: DropOffDiagnostics.Driver) -> String {
        switch d.kind {
        case .event: "event \(d.value)"
        case .breakdown: "\(d.dimension ?? "") = \(d.value)"
        }
    }

    /// `0.21 [0.15–0.30]`
    static func oddsRatio(_ d: DropOffDiagnostics.Driver) -> String {
        "\(number(d.oddsRatio)) [\(number(d.ci95.lower))–\(number(d.ci95.upper))]"
    }

    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "—" }
        return value >= 100 ? String(format: "%.0f", value) : String(format: "%.3g", value)
    }

    static func pValue(_ value: Double) -> String {
        value < 1e-4 ? String(format: "%.1e", value) : String(format: "%.4f", value)
    }

    /// `otp_failed 62%, (no further events) 30%`
    static func nextEvents(_ step: DropOffDiagnostics.Step) -> String {
        guard !step.nextEvents.isEmpty else { return "—" }
        return step.nextEvents.prefix(nextEventsShown).map { "\($0.label) \(Formatting.percent($0.share, digits: 0))" }
            .joined(separator: ", ")
    }

    /// `2m 10s / 14m 3s`
    static func spread(_ spread: DropOffDiagnostics.Spread?) -> String {
        guard let spread, spread.persons > 0 else { return "—" }
        return "\(Formatting.duration(spread.median)) / \(Formatting.duration(spread.p90))"
    }

    /// What is said in place of the drivers when none has q < 0.05.
    static func noDrivers(_ d: DropOffDiagnostics) -> String {
        "No driver with q < 0.05 (candidates need \(d.minSupport) persons)."
    }
}
