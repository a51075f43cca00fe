public import Foundation
import OnrampClient

/// `onramp simulate`: devices walking the five onboarding flows over the past
/// days, each sending through its own `OnrampClient` over HTTP, like the apps.
public enum Simulator {
    public struct Options: Sendable {
        public var host: URL
        /// app -> write key.
        public var keys: [String: String]
        public var devices: Int = 1000
        public var days: Int = 7
        public var seed: UInt64 = 1
        public var concurrency: Int = 16
        /// Devices that were offline and deliver everything at the end, days late.
        public var offlineRate = 0.05
        /// Devices whose clock is hours off (the server corrects it from `sentAt`).
        public var skewRate = 0.03
        /// Devices killed after the server stored a batch but before they forgot it: they send it again.
        public var duplicateRate = 0.02
        /// Changes for the worse planted in some app versions.
        public var plants: [PlantedRegression] = []
        /// How much devices use the app after onboarding.
        public var laterUse = LaterUse()
        public var storage: URL = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("onramp-simulate")
        /// Called now and then with (devices done, total).
        public var progress: @Sendable (Int, Int) -> Void = { _, _ in }

        public init(host: URL, keys: [String: String]) {
            self.host = host
            self.keys = keys
        }
    }

    public struct Summary: Sendable, Equatable {
        public var devices = 0
        public var messages = 0
        public var delivered = 0
        public var rejected = 0
        public var stillQueued = 0
        public var resentForDuplicates = 0
        public var offlineDevices = 0
        public var skewedDevices = 0
        public var messagesPerApp: [String: Int] = [:]

        mutating func add(_ other: Summary) {
            devices += other.devices
            messages += other.messages
            delivered += other.delivered
            rejected += other.rejected
            stillQueued += other.stillQueued
            resentForDuplicates += other.resentForDuplicates
            offlineDevices += other.offlineDevices
            skewedDevices += other.skewedDevices
            messagesPerApp.merge(other.messagesPerApp, uniquingKeysWith: +)
        }
    }

    struct Plan: Sendable {
        var index: Int
        var journey: Journey
        var start: Date
        var offline: Bool
        var skew: TimeInterval
        var duplicate: Bool
    }

    public static func run(_ options: Options) async throws -> Summary {
        let apps = JourneyModel.apps.filter { options.keys[$0] != nil }
        guard !apps.isEmpty else { throw SimulationError("no write keys given for any of \(JourneyModel.apps.joined(separator: ", "))") }
        let now = Date()
        var rng = SeededRandom(seed: options.seed)
        var plans: [Plan] = []
        for index in 0..<options.devices {
            let app = rng.pick(apps.map { ($0, $0 == "ops" ? 1.5 : 1.0) })
            var (journey, start) = JourneyModel.journey(app: app, rng: &rng, plants: options.plants, end: now) { rng in
                now.addingTimeInterval(-Double.random(in: 0..<Double(options.days * 86_400), using: &rng))
            }
            let skew: TimeInterval = rng.chance(options.skewRate) ? (rng.chance(0.5) ? 7_200 : -10_800) : 0
            var later = LaterUse.random(seed: options.seed, device: index)
            journey.actions += options.laterUse.actions(after: journey, rng: &later)
            plans.append(Plan(index: index, journey: journey, start: start, offline: rng.chance(options.offlineRate),
                              skew: skew, duplicate: rng.chance(options.duplicateRate)))
        }
        // The companies their creators set up, then everyone's group calls (`Companies`).
        var companies = Companies()
        for plan in plans {
            // Set up, if the creator got there before now.
            if let company = Companies.founding(plan.journey, start: plan.start, device: deviceId(plan.index, options)), company.at < now {
                companies.add(company.id, at: company.at)
            }
        }
        companies.seal()
        for i in plans.indices {
            plans[i].journey = companies.withGroupCall(
                plans[i].journey, start: plans[i].start, device: deviceId(plans[i].index, options),
                draw: Companies.draw(seed: options.seed, device: plans[i].index))
        }
        // Offline devices deliver last, after everyone else.
        plans.sort { ($0.offline ? 1 : 0, $0.index) < ($1.offline ? 1 : 0, $1.index) }
        try? FileManager.default.removeItem(at: options.storage)
        var summary = Summary()
        var done = 0
        try await withThrowingTaskGroup(of: Summary.self) { group in
            var iterator = plans.makeIterator()
            for _ in 0..<max(1, options.concurrency) {
                guard let plan = iterator.next() else { break }
                group.addTask { try await simulate(plan, options: options, now: now) }
            }
            while let result = try await group.next() {
                summary.add(result)
                done += 1
                if done % 100 == 0 { options.progress(done, plans.count) }
                if let plan = iterator.next() {
                    group.addTask { try await simulate(plan, options: options, now: now) }
                }
            }
        }
        options.progress(done, plans.count)
        try? FileManager.default.removeItem(at: options.storage)
        return summary
    }

    /// A simulated device's anonymous id.
    static func deviceId(_ index: Int, _ options: Options) -> String { "sim-\(options.seed)-\(index)" }

    static func simulate(_ plan: Plan, options: Options, now: Date) async throws -> Summary {
        guard let key = options.keys[plan.journey.app] else { return Summary() }
        let directory = options.storage.appendingPathComponent("device-\(plan.index)")
        let skew = plan.skew
        var configuration = OnrampClient.Configuration(writeKey: key, host: options.host)
        configuration.storageDirectory = directory
        configuration.flushAt = 10_000
        configuration.flushInterval = nil
        configuration.anonymousId = deviceId(plan.index, options)
        configuration.context = plan.journey.context
        // A simulated device is not this machine, and its onboarding is exactly its journey.
        configuration.automaticContext = false
        configuration.trackApplicationLifecycleEvents = false
        configuration.clock = { Date().addingTimeInterval(skew) }
        configuration.retryBaseDelay = .milliseconds(200)
        configuration.maxAttemptsPerFlush = 10
        configuration.log = { _ in }
        let client = try OnrampClient(configuration: configuration)
        var sent = 0
        for action in plan.journey.actions.sorted(by: { $0.at < $1.at }) {
            let happened = plan.start.addingTimeInterval(action.at)
            guard happened < now else { break }  // not yet: this person is still in the middle of it
            let deviceTime = happened.addingTimeInterval(skew)
            switch action.kind {
            case .track: client.track(action.name, properties: action.properties, timestamp: deviceTime)
            case .screen: client.screen(action.name, properties: action.properties, timestamp: deviceTime)
            case .identify: client.identify(userId: action.name, timestamp: deviceTime)
            case .group: client.group(action.name, traits: action.properties, timestamp: deviceTime)
            }
            sent += 1
        }
        var resent = 0
        if plan.duplicate {
            // Keep a copy of the queue as if the app died before learning the batch was stored.
            let copy = options.storage.appendingPathComponent("device-\(plan.index)-again")
            try FileManager.default.copyItem(at: directory, to: copy)
            await client.flush()
            var again = configuration
            again.storageDirectory = copy
            let revived = try OnrampClient(configuration: again)
            resent = revived.statistics.queued
            await revived.flush()
            try? FileManager.default.removeItem(at: copy)
        } else {
            await client.flush()
        }
        let stats = client.statistics
        try? FileManager.default.removeItem(at: directory)
        return Summary(
            devices: 1, messages: sent, delivered: stats.delivered, rejected: stats.rejected, stillQueued: stats.queued,
            resentForDuplicates: resent, offlineDevices: plan.offline ? 1 : 0, skewedDevices: skew != 0 ? 1 : 0,
            messagesPerApp: [plan.journey.app: sent])
    }
}

public struct SimulationError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
