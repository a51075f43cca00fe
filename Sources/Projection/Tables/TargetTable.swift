import Funnels
import LibPQ

/// Mirrors the configured targets into `funnel_targets` on every run, so
/// dashboards draw target lines from the same numbers the report checks.
enum TargetTable {
    static func write(_ c: Connection, configuration: FunnelConfiguration) throws {
        try c.query("DELETE FROM funnel_targets")
        try c.copyIn("COPY funnel_targets (funnel, app, name, metric, bound, threshold) FROM STDIN") { writer in
            for funnel in configuration.funnels {
                for target in funnel.targets {
                    let metric: String
                    switch target.metric {
                    case .completionRate: metric = "completion_rate"
                    case .medianSecondsToComplete: metric = "median_seconds_to_complete"
                    case .p90SecondsToComplete: metric = "p90_seconds_to_complete"
                    case .conversion(let from, let to): metric = "conversion:\(from)->\(to)"
                    }
                    let bound: String
                    switch target.bound {
                    case .atLeast: bound = "at_least"
                    case .atMost: bound = "at_most"
                    }
                    try writer.writeRow([
                        .text(funnel.name), .text(funnel.app), .text(target.name), .text(metric), .text(bound),
                        .double(target.bound.limit),
                    ])
                }
            }
        }
    }
}
