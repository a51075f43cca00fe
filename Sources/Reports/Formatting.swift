import Foundation
import Funnels

/// Number and duration formatting shared by the renderers.
enum Formatting {
    static func percent(_ value: Double?, digits: Int = 1) -> String {
        guard let value, value.isFinite else { return "—" }
        return String(format: "%.\(digits)f%%", value * 100)
    }

    static func interval(_ rate: Rate) -> String {
        guard let ci = rate.ci95 else { return "—" }
        return "[\(percent(ci.lower))–\(percent(ci.upper))]"
    }

    /// `412.0` -> `6m 52s`; `90061` -> `1d 1h`.
    static func duration(_ seconds: Double?) -> String {
        guard let seconds, seconds.isFinite else { return "—" }
        let s = Int(seconds.rounded())
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m \(s % 60)s" }
        if s < 86_400 { return "\(s / 3600)h \(s % 3600 / 60)m" }
        return "\(s / 86_400)d \(s % 86_400 / 3600)h"
    }

    static func window(_ seconds: Int64) -> String {
        seconds % 3600 == 0 ? "\(seconds / 3600)h" : duration(Double(seconds))
    }

    static func target(_ t: TargetResult) -> String {
        let op: String
        let threshold: String
        let value: String
        switch t.bound {
        case .atLeast: op = "≥"
        case .atMost: op = "≤"
        }
        if t.name.contains("time") || t.name.contains("seconds") {
            threshold = duration(t.threshold)
            value = duration(t.value)
        } else {
            threshold = percent(t.threshold, digits: 0)
            value = percent(t.value)
        }
        return "\(t.met ? "met" : "MISSED") \(t.name): \(value) (target \(op) \(threshold))"
    }

    static func pad(_ s: String, _ width: Int, right: Bool = false) -> String {
        let count = s.count
        guard count < width else { return s }
        let fill = String(repeating: " ", count: width - count)
        return right ? fill + s : s + fill
    }
}
