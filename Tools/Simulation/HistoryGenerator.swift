public import Foundation
public import OnrampClient

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
    /// A track's or screen's properties; an identify's or a group call's traits.
    public var properties: String
    public var context: String
    /// A group call's group.
    public var groupId: String?
}

/// One simulated device's events in time, before they become log rows:
/// what an in-memory pipeline (a test evaluating funnels without a
/// database) reads without a JSON round trip.
public struct SimulatedDevice: Sendable {
    public struct Event: Sendable {
        /// `track`, `screen`, `identify` or `group`.
        public var type: String
        /// The event or screen name; nil for identify and group.
        public var name: String?
        /// Known from the device's first identify on.
        public var userId: String?
        /// Microseconds since the Unix epoch.
        public var timestamp: Int64
        /// A track's or screen's properties; a group call's traits.
        public var properties: [String: JSONValue]
        /// A group call's group (`Companies`).
        public var groupId: String?
    }

    public var app: String
    public var anonymousId: String
    public var context: [String: JSONValue]
    public var events: [Event]
}

/// Streams the simulator's journeys as log rows, device after device, so a
/// history of any size is produced without holding it in memory.
public enum HistoryGenerator {
    /// Calls `body` for about `count` events of devices starting between
    /// `from` and `to`, of `apps` (default: all four), with `plants` planted
    /// and `laterUse` after onboarding; returns the number of events produced.
    @discardableResult
    public static func generate(
        count: Int, from: Date, to: Date, seed: UInt64, devicePrefix: String = "dev", apps: Set<String>? = nil,
        plants: [PlantedRegression] = [], laterUse: LaterUse = LaterUse(),
        _ body: (GeneratedEvent) throws -> Void
    ) rethrows -> Int {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        func json(_ value: [String: JSONValue]) -> String {
            (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        }
        return try devices(
            count: count, from: from, to: to, seed: seed, devicePrefix: devicePrefix, apps: apps, plants: plants, laterUse: laterUse
        ) { device in
            let context = json(device.context)
            for (n, event) in device.events.enumerated() {
                try body(
                    GeneratedEvent(
                        app: device.app, type: event.type, messageId: "\(device.anonymousId)-\(n)", event: event.name,
                        anonymousId: device.anonymousId, userId: event.userId, timestamp: event.timestamp,
                        properties: json(event.properties), context: context, groupId: event.groupId))
            }
        }
    }

    /// The same history as `generate`, a device at a time, unencoded;
    /// without `groupCalls`, ops' companies send none (`Companies`), for a
    /// pipeline that counts persons only, in one pass.
    @discardableResult
    public static func devices(
        count: Int, from: Date, to: Date, seed: UInt64, devicePrefix: String = "dev", apps: Set<String>? = nil,
        plants: [PlantedRegression] = [], stories: Bool = true, laterUse: LaterUse = LaterUse(), groupCalls: Bool = true,
        _ body: (SimulatedDevice) throws -> Void
    ) rethrows -> Int {
        guard groupCalls else {
            return try walk(
                count: count, from: from, to: to, seed: seed, devicePrefix: devicePrefix, apps: apps, plants: plants, stories: stories,
                laterUse: laterUse, companies: nil
            ) { device, _, _ in try body(device) }
        }
        // The companies first, so that an employee joins one set up before
        // them whichever device was drawn first (`Companies`): from a first
        // pass whose employees name no company of the history, so it sends
        // the same calls at the same times and stops at the same device.
        var companies = Companies()
        _ = walk(
            count: count, from: from, to: to, seed: seed, devicePrefix: devicePrefix, apps: apps, plants: plants, stories: stories,
            laterUse: laterUse, companies: Companies()
        ) { device, _, _ in
            for event in device.events where event.type == "group" {
                guard let id = event.groupId, Companies.isFounding(id, by: device.anonymousId) else { continue }
                companies.add(id, at: Date(timeIntervalSince1970: Double(event.timestamp) / 1_000_000))
            }
        }
        companies.seal()
        return try walk(
            count: count, from: from, to: to, seed: seed, devicePrefix: devicePrefix, apps: apps, plants: plants, stories: stories,
            laterUse: laterUse, companies: companies
        ) { device, _, _ in try body(device) }
    }

    /// The devices in the order they are drawn, each with its journey and
    /// start, their group calls naming `companies`' companies (none without).
    private static func walk(
        count: Int, from: Date, to: Date, seed: UInt64, devicePrefix: String, apps: Set<String>?, plants: [PlantedRegression],
        stories: Bool, laterUse: LaterUse, companies: Companies?, _ body: (SimulatedDevice, Journey, Date) throws -> Void
    ) rethrows -> Int {
        var rng = SeededRandom(seed: seed)
        var produced = 0
        var device = 0
        let span = max(1, to.timeIntervalSince(from))
        while produced < count {
            let app = rng.pick(JourneyModel.apps.filter { apps?.contains($0) ?? true }.map { ($0, $0 == "ops" ? 1.5 : 1.0) })
            let (journey, start) = JourneyModel.journey(app: app, rng: &rng, plants: plants, stories: stories, end: to) { rng in
                from.addingTimeInterval(Double.random(in: 0..<span, using: &rng))
            }
            let anonymousId = "\(devicePrefix)-\(seed)-\(device)"
            var userId: String?
            var events: [SimulatedDevice.Event] = []
            var later = LaterUse.random(seed: seed, device: device)
            let called = companies?.withGroupCall(journey, start: start, device: anonymousId, draw: Companies.draw(seed: seed, device: device))
            let actions = (called ?? journey).actions + laterUse.actions(after: journey, rng: &later)
            for action in actions.sorted(by: { $0.at < $1.at }) {
                let time = start.addingTimeInterval(action.at)
                guard time < to, produced < count else { break }
                if action.kind == .identify { userId = action.name }
                events.append(SimulatedDevice.Event(
                    type: action.kind.segmentType, name: action.kind == .identify || action.kind == .group ? nil : action.name,
                    userId: userId, timestamp: Int64((time.timeIntervalSince1970 * 1_000_000).rounded()), properties: action.properties,
                    groupId: action.kind == .group ? action.name : nil))
                produced += 1
            }
            try body(SimulatedDevice(app: app, anonymousId: anonymousId, context: journey.context, events: events), journey, start)
            device += 1
        }
        return produced
    }
}
