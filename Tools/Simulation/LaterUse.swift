import Foundation

/// What a device does after onboarding: on each of the following days it may
/// come back for a short session of the app's everyday events (none of which
/// is an onboarding step). Those who completed onboarding come back more, and
/// both fade with the days, so retention by outcome (docs/funnels.md, "Retention") has a real
/// difference to show, and a generated history has most of its events, as a
/// live app's log does, outside onboarding.
public struct LaterUse: Sendable {
    /// Days after the start a device may come back on.
    public static let days = 1...35

    /// Multiplies the chance of coming back on a day: 0 for onboarding only,
    /// 1 for the model below, more for a busier app.
    public var scale: Double

    public init(scale: Double = 1) {
        self.scale = scale
    }

    /// The step whose event means the app's onboarding was completed.
    static let lastStep = ["yoked": "onboarding_completed", "ops": "tutorial", "umuve": "main_screen_viewed", "forma": "onboarding_completed"]

    /// Everyday events by app: (kind, name).
    static let everyday: [String: [(Action.Kind, String)]] = [
        "yoked": [(.track, "match_viewed"), (.track, "message_sent"), (.screen, "Matches"), (.screen, "Chat")],
        "ops": [(.screen, "shifts"), (.screen, "schedule"), (.track, "shift_swapped"), (.track, "clock_in")],
        "umuve": [(.track, "quote_viewed"), (.track, "move_booked"), (.screen, "Moves")],
        "forma": [(.track, "folder_created"), (.track, "file_sorted"), (.screen, "Library")],
    ]

    /// The chance of a session on `day`: completers from about 55 % on day
    /// 1 to 17 % on day 30, the others from 20 % to 4 %.
    static func chance(day: Int, completed: Bool) -> Double {
        completed ? 0.55 * pow(Double(day), -0.35) : 0.2 * pow(Double(day), -0.5)
    }

    /// The sessions after `journey`'s onboarding, at seconds after its first event.
    func actions(after journey: Journey, rng: inout SeededRandom) -> [Action] {
        guard scale > 0, let last = Self.lastStep[journey.app], let names = Self.everyday[journey.app] else { return [] }
        let completed = journey.actions.contains { $0.name == last }
        var actions: [Action] = []
        for day in Self.days where rng.chance(min(1, scale * Self.chance(day: day, completed: completed))) {
            var t = Double(day) * 86_400 + Double.random(in: 0..<86_400, using: &rng)
            actions.append(Action(kind: .track, name: "app_opened", at: t))
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                t += rng.gap(median: 40)
                let (kind, name) = rng.pick(names.map { ($0, 1.0) })
                actions.append(Action(kind: kind, name: name, at: t))
            }
        }
        return actions
    }

    /// A device's own generator for its later use, apart from the one that
    /// draws journeys, so a seed gives the same onboarding with or without it.
    static func random(seed: UInt64, device: Int) -> SeededRandom {
        SeededRandom(seed: seed ^ (UInt64(truncatingIfNeeded: device) &* 0xD1B5_4A32_D192_ED03) ^ 0x4C41_5445_5255_5345)
    }
}
