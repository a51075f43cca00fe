import Funnels
import LibPQ

/// Keeps `funnel_regressions` and `funnel_instrumentation` at what the last
/// whole-history report found, so Grafana and ad-hoc SQL see the same alerts
/// the report printed.
enum RegressionTable {
    /// Replaces the rows of the reported funnels with their regressions and
    /// improvements, and drops those of funnels no longer in `configured`.
    static func write(_ c: Connection, reports: [FunnelReport], configured: [String], now: Int64) throws {
        for table in ["funnel_regressions", "funnel_instrumentation"] {
            try c.query(
                "DELETE FROM \(table) WHERE funnel = ANY($1::text[]) OR NOT funnel = ANY($2::text[])",
                [.textArray(reports.map(\.funnel)), .textArray(configured)])
        }
        try c.copyIn(
            """
            COPY funnel_regressions (funnel, app, checked_at, direction, kind, metric, step,
                baseline_label, baseline_value, baseline_persons, baseline_ci_low, baseline_ci_high,
                recent_label, recent_value, recent_persons, recent_ci_low, recent_ci_high,
                difference, p_value, q_value, likely_instrumentation) FROM STDIN
            """
        ) { writer in
            for report in reports {
                let found = report.regressions
                for (direction, changes) in [("regression", found.regressions), ("improvement", found.improvements)] {
                    for change in changes {
                        var row: [PostgresValue] = [
                            .text(report.funnel), .text(report.app), .microseconds(now), .text(direction), .text(change.kind.rawValue),
                            .text(change.metric.rawValue), .optional(change.step),
                        ]
                        for side in [change.baseline, change.recent] {
                            row += [
                                .text(side.label), side.value.map(PostgresValue.double) ?? .null, .int(side.persons),
                                (side.ci95?.lower).map(PostgresValue.double) ?? .null, (side.ci95?.upper).map(PostgresValue.double) ?? .null,
                            ]
                        }
                        row += [.double(change.difference), .double(change.pValue), .double(change.qValue), .optional(change.likelyInstrumentation)]
                        try writer.writeRow(row)
                    }
                }
            }
        }
        try c.copyIn(
            """
            COPY funnel_instrumentation (funnel, app, checked_at, kind, step, events, path, platform, baseline, recent,
                baseline_events, recent_events, recent_starters, baseline_type, recent_type, description) FROM STDIN
            """
        ) { writer in
            for report in reports {
                for f in report.instrumentation {
                    try writer.writeRow([
                        .text(report.funnel), .text(report.app), .microseconds(now), .text(f.kind.rawValue), .text(f.step), .textArray(f.labels),
                        .optional(f.path), .optional(f.platform), .text(f.baseline), .text(f.recent), .int(Int64(f.baselineEvents)),
                        .int(Int64(f.recentEvents)), .int(Int64(f.recentStarters)), .optional(f.baselineType), .optional(f.recentType),
                        .text(f.sentence),
                    ])
                }
            }
        }
    }
}
