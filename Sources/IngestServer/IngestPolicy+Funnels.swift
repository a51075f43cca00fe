public import EventLog
public import Funnels

extension IngestPolicy {
    /// The policy the funnel configuration sets: each app's PII properties
    /// and whether they are removed or hashed, the tracking plans apps
    /// enforce; the other limits as default.
    public init(funnels: FunnelConfiguration) {
        self.init()
        for app in funnels.apps {
            pii[app.name] = PIIPolicy(properties: Set(app.piiProperties), mode: app.piiMode == .hash ? .hash : .remove)
            if let plan = app.trackingPlan, plan.enforce {
                enforcedPlans[app.name] = TrackingRules(events: Dictionary(plan.entries.map { entry in
                    (TrackingRules.key(type: entry.type, name: entry.name), entry.properties.mapValues(\.rawValue))
                }) { first, _ in first })
            }
        }
    }
}
