import Foundation
import OnrampClient

/// One thing a simulated device does, at a time relative to its first open.
struct Action: Sendable {
    enum Kind: Sendable { case track, screen, identify, group }
    var kind: Kind
    /// The event or screen name; the user id of an identify; the group id of a group call.
    var name: String
    var properties: [String: JSONValue] = [:]
    /// Seconds after the device's first event.
    var at: Double
}

extension Action.Kind {
    /// The Segment message type.
    var segmentType: String {
        switch self {
        case .track: "track"
        case .screen: "screen"
        case .identify: "identify"
        case .group: "group"
        }
    }
}

/// A device's onboarding: the app, its context and what it does.
struct Journey: Sendable {
    var app: String
    var context: [String: JSONValue]
    var actions: [Action]
}

/// Builds journeys that walk the five shipped flows with realistic gaps,
/// drop-offs at every step, resumed sessions that repeat a screen, skips,
/// sign-in (identify) part way, and real differences between variants.
enum JourneyModel {
    static let apps = ["yoked", "ops", "umuve", "forma"]

    /// A device's journey and when it starts. Without recent-days plants the
    /// journey is drawn first (the order a seed has always given); with them
    /// the start comes first, since it decides whether they apply.
    static func journey(
        app: String, rng: inout SeededRandom, plants: [PlantedRegression], stories: Bool = true, end: Date,
        start drawStart: (inout SeededRandom) -> Date
    ) -> (journey: Journey, start: Date) {
        guard plants.contains(where: { $0.days != nil }) else {
            let journey = journey(app: app, rng: &rng, plants: plants, stories: stories)
            return (journey, drawStart(&rng))
        }
        let start = drawStart(&rng)
        return (journey(app: app, rng: &rng, plants: plants, stories: stories, age: end.timeIntervalSince(start) / 86_400), start)
    }

    /// `age`: days from the device's start to the end of the history, for
    /// plants limited to recent days. Without `stories`, no version or
    /// platform behaves differently from another (yoked's old release and
    /// its broken code entry on Android are off): stable traffic.
    static func journey(
        app: String, rng: inout SeededRandom, plants: [PlantedRegression] = [], stories: Bool = true, age: Double = 0
    ) -> Journey {
        let plants = plants.filter { $0.app == app }.map { plant in
            // A plant whose days this device started before still releases its version, without the change.
            var plant = plant
            if let days = plant.days, age >= Double(days) { plant.points = 0 }
            return plant
        }
        var journey: Journey
        switch app {
        case "yoked": journey = yoked(&rng, plants: plants, stories: stories)
        case "ops": journey = ops(&rng, plants: plants)
        case "umuve": journey = umuve(&rng, plants: plants)
        default: journey = forma(&rng, plants: plants)
        }
        // A broken release: its devices do everything as before, but never send the event.
        for plant in plants where plant.stopsSending && journey.context["app"] == ["version": .string(plant.version)] {
            journey.actions.removeAll { ($0.kind == .track || $0.kind == .screen) && $0.name == plant.step }
        }
        return journey
    }

    /// A device's context; planted versions the app lacks join `versions` as
    /// its newest release, with the largest share.
    static func device(_ rng: inout SeededRandom, versions: [(String, Double)], plants: [PlantedRegression] = []) -> [String: JSONValue] {
        var versions = versions
        let top = versions.map(\.1).max() ?? 1
        for plant in plants where plant.version != "*" && !versions.contains(where: { $0.0 == plant.version }) {
            versions.append((plant.version, top))
        }
        let ios = rng.chance(0.62)
        let version = rng.pick(versions)
        return [
            "app": ["version": .string(version)],
            "os": ["name": .string(ios ? "iOS" : "Android"), "version": .string(ios ? "17.\(Int.random(in: 0...5, using: &rng))" : "14")],
            "device": ["type": .string(ios ? "ios" : "android")],
            "locale": .string(rng.pick([("en-US", 6), ("en-GB", 2), ("de-DE", 1), ("es-MX", 1)])),
        ]
    }

    /// The planted change of continue rate for a step of this device.
    static func penalty(_ plants: [PlantedRegression], context: [String: JSONValue]) -> (String, [String: JSONValue]) -> Double {
        let mine = plants.filter { $0.points != 0 && ($0.version == "*" || context["app"] == ["version": .string($0.version)]) }
        guard !mine.isEmpty else { return { _, _ in 0 } }
        return { name, properties in
            mine.filter { $0.step == name || properties["step"] == .string($0.step) }.reduce(0) { $0 + $1.points / 100 }
        }
    }

    /// Walks `steps` with a continue probability and median gap each; a step may be repeated after a resume.
    static func walk(
        _ steps: [(name: String, kind: Action.Kind, properties: [String: JSONValue], continueRate: Double, gap: Double)],
        rng: inout SeededRandom, start: Double = 0,
        penalty: (String, [String: JSONValue]) -> Double = { _, _ in 0 }
    ) -> [Action] {
        var t = start
        var actions: [Action] = []
        for (i, step) in steps.enumerated() {
            if i > 0 {
                guard rng.chance(step.continueRate - penalty(step.name, step.properties)) else { break }
                t += rng.gap(median: step.gap)
                if rng.chance(0.04) {  // app killed and resumed hours later: the screen shows again
                    actions.append(Action(kind: step.kind, name: steps[i - 1].name, properties: steps[i - 1].properties, at: t))
                    t += rng.gap(median: 3 * 3600)
                }
            }
            actions.append(Action(kind: step.kind, name: step.name, properties: step.properties, at: t))
        }
        return actions
    }

    static func yoked(_ rng: inout SeededRandom, plants: [PlantedRegression], stories: Bool = true) -> Journey {
        let context = device(&rng, versions: [("2.3.0", 6), ("2.2.1", 3), ("2.1.0", 1)], plants: plants)
        let oldVersion = stories && context["app"] == ["version": "2.1.0"]
        // The story the drop-off diagnostics must find: on Android, 2.3.0's
        // code entry fails more often, and those it fails send otp_failed
        // (again and again) before they leave.
        let brokenOTP = stories && context["app"] == ["version": "2.3.0"] && context["device"] == ["type": "android"]
        let steps: [(String, Double, Double)] = [
            ("onboarding_started", 1, 0), ("phone_entered", 0.93, 25),
            ("otp_verified", oldVersion ? 0.8 : (brokenOTP ? 0.8 : 0.95), 40),
            ("age_verified", 0.97, 20), ("profile_created", 0.93, 90), ("location_allowed", 0.9, 15),
            ("questionnaire_started", 0.97, 10), ("questionnaire_completed", 0.9, 180), ("profiling_completed", 0.98, 60),
            ("verification_consent_given", 0.94, 20), ("verification_completed", 0.93, 45), ("onboarding_completed", 0.99, 5),
        ]
        var actions = walk(steps.map { ($0.0, .track, [:], $0.1, $0.2) }, rng: &rng, penalty: penalty(plants, context: context))
        if let phone = actions.first(where: { $0.name == "phone_entered" }) {
            let verified = actions.first { $0.name == "otp_verified" }
            // Left at the code: most of the broken release's and some others
            // tried and failed first. Got through: a few mistyped once.
            let failures = verified == nil
                ? (rng.chance(brokenOTP ? 0.95 : 0.35) ? 1 + Int(rng.next() % 3) : 0)
                : (rng.chance(brokenOTP ? 0.12 : 0.04) ? 1 : 0)
            var t = phone.at
            for _ in 0..<failures {
                t += rng.gap(median: 30)
                if let verified, t >= verified.at { break }
                actions.append(Action(kind: .track, name: "otp_failed", properties: ["reason": "code_rejected"], at: t))
            }
        }
        if let otp = actions.first(where: { $0.name == "otp_verified" }) {
            // The phone number becomes the account: the device is identified from here on.
            actions.append(Action(kind: .identify, name: "yoked-user-\(rng.next() % 1_000_000_000)", at: otp.at + 1))
        }
        return Journey(app: "yoked", context: context, actions: actions)
    }

    static func ops(_ rng: inout SeededRandom, plants: [PlantedRegression]) -> Journey {
        let context = device(&rng, versions: [("3.4.0", 7), ("3.3.2", 3)], plants: plants)
        let creator = rng.chance(0.35)
        let flow: JSONValue = creator ? "company_creator" : "employee"
        let version: String = rng.chance(0.5) ? "v3" : "v2"  // consolidated flow vs the older 6/11-step one
        let auth: String = rng.pick([("email", 5), ("google", 3), ("apple", 2)])
        let boost = version == "v3" ? 0.07 : 0  // the consolidated flow really converts better
        let authBoost = auth == "apple" ? 0.02 : (auth == "email" ? -0.03 : 0)
        let props: [String: JSONValue] = ["flow": flow, "flow_version": .string(version), "auth_method": .string(auth)]
        let screens: [(String, Double, Double)] = creator
            ? [("welcome", 1, 0), ("signup", 0.9, 8), ("credentials", 0.88 + authBoost, 30), ("profile", 0.92, 40),
               ("companySetup", 0.9 + boost, 20), ("companyDetails", 0.85 + boost, 90), ("companyCode", 0.93 + boost, 30),
               ("ready", 0.97, 10), ("tutorial", 0.95, 20)]
            : [("welcome", 1, 0), ("signup", 0.9, 8), ("credentials", 0.86 + authBoost, 30), ("profile", 0.88 + boost, 40),
               ("codeEntry", 0.75 + 2 * boost, 60), ("ready", 0.96, 10), ("tutorial", 0.93, 20)]
        var actions = walk(screens.map { ($0.0, .screen, props, $0.1, $0.2) }, rng: &rng, penalty: penalty(plants, context: context))
        if let credentials = actions.first(where: { $0.name == "credentials" }) {
            actions.append(Action(kind: .identify, name: "ops-user-\(rng.next() % 1_000_000_000)", at: credentials.at + 2))
        }
        return Journey(app: "ops", context: context, actions: actions)
    }

    static func umuve(_ rng: inout SeededRandom, plants: [PlantedRegression]) -> Journey {
        let context = device(&rng, versions: [("1.2.0", 8), ("1.1.0", 2)], plants: plants)
        let less = penalty(plants, context: context)
        var t = 0.0
        var actions = [Action(kind: .track, name: "onboarding_screen_viewed", properties: ["page": 1], at: t)]
        guard rng.chance(0.92 - less("onboarding_skipped", [:]) - less("onboarding_screen_viewed", [:])) else {
            return Journey(app: "umuve", context: context, actions: actions)
        }
        if rng.chance(0.45) {
            t += rng.gap(median: 3)
            actions.append(Action(kind: .track, name: "onboarding_skipped", properties: ["from_page": 1], at: t))
        } else {
            for page in 2...3 {
                t += rng.gap(median: 4)
                actions.append(Action(kind: .track, name: "onboarding_screen_viewed", properties: ["page": .number(Double(page))], at: t))
                if !rng.chance(0.95) { return Journey(app: "umuve", context: context, actions: actions) }
            }
        }
        guard rng.chance(0.7 - less("apple_sign_in_completed", [:])) else { return Journey(app: "umuve", context: context, actions: actions) }
        t += rng.gap(median: 20)
        actions.append(Action(kind: .track, name: "apple_sign_in_completed", at: t))
        actions.append(Action(kind: .identify, name: "umuve-user-\(rng.next() % 1_000_000_000)", at: t + 1))
        if rng.chance(0.96 - less("main_screen_viewed", [:])) {
            actions.append(Action(kind: .track, name: "main_screen_viewed", at: t + rng.gap(median: 2)))
        }
        return Journey(app: "umuve", context: context, actions: actions)
    }

    static func forma(_ rng: inout SeededRandom, plants: [PlantedRegression]) -> Journey {
        var context = device(&rng, versions: [("1.0.3", 7), ("1.0.2", 3)], plants: plants)
        context["os"] = ["name": "macOS", "version": "15.1"]
        context["device"] = ["type": "mac"]
        let steps: [(String, Double, Double)] = [
            ("welcome", 1, 0), ("folders", 0.9, 20), ("quiz", 0.85, 40), ("folderTemplates", 0.9, 60), ("preview", 0.95, 30),
        ]
        let less = penalty(plants, context: context)
        var actions = walk(steps.map { ("onboarding_step_viewed", .track, ["step": .string($0.0)], $0.1, $0.2) }, rng: &rng, penalty: less)
        if actions.count == steps.count, rng.chance(0.93 - less("onboarding_completed", [:])), let last = actions.last {
            actions.append(Action(kind: .track, name: "onboarding_completed", at: last.at + rng.gap(median: 10)))
        }
        return Journey(app: "forma", context: context, actions: actions)
    }
}
