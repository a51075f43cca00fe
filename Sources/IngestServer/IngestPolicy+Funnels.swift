public import EventLog
public import Funnels

extension IngestPolicy {
    /// The policy the funnel configuration sets: each app's PII properties
    /// and whether they are removed or hashed; the other limits as default.
    public init(funnels: FunnelConfiguration) {
        self.init()
        for app in funnels.apps {
            pii[app.name] = PIIPolicy(properties: Set(app.piiProperties), mode: app.piiMode == .hash ? .hash : .remove)
        }
    }
}
