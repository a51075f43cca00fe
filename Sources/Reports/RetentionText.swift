import Foundation
import Funnels

/// How the text outputs (table, markdown, csv) say retention, so they read alike.
enum RetentionText {
    /// `D7`
    static func day(_ d: RetentionDay) -> String { "D\(d.day)" }

    /// `41.2% [37.0–45.5%] of 512`, with `, 40 pending` while some persons'
    /// day has not passed; `pending (512)` while nobody's has.
    static func side(_ s: RetentionSide) -> String {
        guard s.eligible > 0 else { return s.pending > 0 ? "pending (\(s.pending))" : "—" }
        return "\(Formatting.percent(s.rate.value)) \(Formatting.interval(s.rate)) of \(s.eligible)"
            + (s.pending > 0 ? ", \(s.pending) pending" : "")
    }

    /// `+21.3 pts`
    static func difference(_ d: RetentionDay) -> String {
        d.difference.map { String(format: "%+.1f pts", $0 * 100) } ?? "—"
    }

    static func pValue(_ d: RetentionDay) -> String {
        d.pValue.map(DiagnosticsText.pValue) ?? "—"
    }
}
