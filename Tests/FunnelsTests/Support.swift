import Foundation
@testable import Funnels

/// Microseconds per second: test timelines are written in seconds.
let second: Int64 = 1_000_000
/// 2025-11-21T10:00:00Z, a Friday.
let base: Int64 = 1_763_719_200 * second

func track(_ name: String, at seconds: Int64, id: String? = nil, _ attributes: [String: String] = [:]) -> FunnelEvent {
    FunnelEvent(
        messageId: id ?? "\(name)@\(seconds)", kind: .track, name: name,
        timestamp: base + seconds * second, attributes: attributes
    )
}

func screen(_ name: String, at seconds: Int64, id: String? = nil, _ attributes: [String: String] = [:]) -> FunnelEvent {
    FunnelEvent(
        messageId: id ?? "screen:\(name)@\(seconds)", kind: .screen, name: name,
        timestamp: base + seconds * second, attributes: attributes
    )
}

/// A funnel of track events, one required step per name.
func linearFunnel(_ names: [String], window: Int64 = 86_400, exclusions: [Exclusion] = []) -> Funnel {
    Funnel(
        name: "test", app: "test", windowSeconds: window,
        steps: names.map { FunnelStep(.event($0)) }, exclusions: exclusions
    )
}

/// Seconds relative to `base`, for readable expectations.
func rel(_ timestamp: Int64?) -> Int64? {
    timestamp.map { ($0 - base) / second }
}

