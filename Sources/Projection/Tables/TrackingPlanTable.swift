import Funnels
import LibPQ

/// Mirrors the apps' tracking plans into `tracking_plan_events` and
/// `tracking_plan_properties` on every run, for `analytics.tracking_violations`
/// to hold the catalogue against them (docs/tracking-health.md).
enum TrackingPlanTable {
    static func write(_ c: Connection, configuration: FunnelConfiguration) throws {
        try c.executeScript("DELETE FROM tracking_plan_properties; DELETE FROM tracking_plan_events")
        let plans = configuration.apps.compactMap { app in app.trackingPlan.map { (app.name, $0) } }
        guard !plans.isEmpty else { return }
        try c.copyIn("COPY tracking_plan_events (app, type, event, enforce) FROM STDIN") { writer in
            for (app, plan) in plans {
                for entry in plan.entries { try writer.writeRow([.text(app), .text(entry.type), .text(entry.name), .bool(plan.enforce)]) }
            }
        }
        try c.copyIn("COPY tracking_plan_properties (app, type, event, path, json_type) FROM STDIN") { writer in
            for (app, plan) in plans {
                for entry in plan.entries {
                    for (path, type) in entry.properties.sorted(by: { $0.key < $1.key }) {
                        try writer.writeRow([.text(app), .text(entry.type), .text(entry.name), .text("properties." + path), .text(type.rawValue)])
                    }
                }
            }
        }
    }
}
