public import Foundation
import OnrampClient

/// One event of generated history, ready to append to the log without HTTP
/// (benchmarks write millions this way with COPY).
public struct GeneratedEvent: Sendable {
    public var app: String
    public var type: String
    public var messageId: String
    public var event: String?
    public var anonymousId: String
    public var userId: String?
    /// Microseconds since the Unix epoch.
    public var timestamp: Int64
    public var properties: String
    public var context: String
}

/// Streams the simulator's journeys as log rows, device after device, so a
/// history of any size is produced without holding it in memory.
public enum HistoryGenerator {
    /// Calls `body` for about `count` events of devices starting between
    /// `from` and `to`, of `apps` (default: all four), with `plants` planted;
    /// returns the number of events produced.
    @discardableResult
    public static func generate(
        count: Int, from: Date, to: Date, seed: UInt64, devicePrefix: String = "dev", apps: Set<String>? = nil,
        plants: [PlantedRegression] = [],
        _ body: (GeneratedEvent) throws -> Void
    ) rethrows -> Int {
        var rng = SeededRandom(seed: seed)
        var produced = 0
        var device = 0
        let span = max(1, to.timeIntervalSince(from))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        while produced < count {
            let app = rng.pick(JourneyModel.apps.filter { apps?.contains($0) ?? true }.map { ($0, $0 == "ops" ? 1.5 : 1.0) })
            let journey = JourneyModel.journey(app: app, rng: &rng, plants: plants)
            let start = from.addingTimeInterval(Double.random(in: 0..<span, using: &rng))
            let anonymousId = "\(devicePrefix)-\(seed)-\(device)"
            let context = (try? encoder.encode(journey.context)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            var userId: String?
            for (n, action) in journey.actions.sorted(by: { $0.at < $1.at }).enumerated() {
                let time = start.addingTimeInterval(action.at)
                guard time < to else { break }
                let properties = (try? encoder.encode(action.properties)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
                if action.kind == .identify { userId = action.name }
                try body(
                    GeneratedEvent(
                        app: app, type: action.kind == .track ? "track" : (action.kind == .screen ? "screen" : "identify"),
                        messageId: "\(anonymousId)-\(n)", event: action.kind == .identify ? nil : action.name,
                        anonymousId: anonymousId, userId: userId,
                        timestamp: Int64((time.timeIntervalSince1970 * 1_000_000).rounded()), properties: properties,
                        context: context))
                produced += 1
                if produced >= count { break }
            }
            device += 1
        }
        return produced
    }
}
