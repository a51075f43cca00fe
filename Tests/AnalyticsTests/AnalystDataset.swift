import Foundation
import LibPQ
import TestSupport

/// A small, hand-made history with known answers for every example query:
/// who completes, who is stuck where, which variant converts better.
struct AnalystDataset {
    static let day: Int64 = 86_400_000_000
    /// 10:00 UTC three days ago: every window of these cohorts has closed.
    static let t0 = (Timestamps.microseconds(Date()) / day - 3) * day + 10 * 3_600_000_000
    static let iOS23 = #"{"os": {"name": "iOS"}, "app": {"version": "2.3.0"}}"#
    static let iOS22 = #"{"os": {"name": "iOS"}, "app": {"version": "2.2.0"}}"#
    static let android22 = #"{"os": {"name": "Android"}, "app": {"version": "2.2.0"}}"#

    static let yokedSteps = [
        "onboarding_started", "phone_entered", "otp_verified", "age_verified", "profile_created", "location_allowed",
        "questionnaire_started", "questionnaire_completed", "profiling_completed", "verification_consent_given",
        "verification_completed", "onboarding_completed",
    ]
    static let creatorScreens = ["welcome", "signup", "credentials", "profile", "companySetup", "companyDetails", "companyCode", "ready", "tutorial"]
    static let employeeScreens = ["welcome", "signup", "credentials", "profile", "codeEntry", "ready", "tutorial"]

    /// Employees e1…e20: v2 for 1–10 (3 complete), v3 for 11–20 (8 complete).
    static func employeeCompletes(_ n: Int) -> Bool { n <= 3 || (11...18).contains(n) }
    static func employeeVersion(_ n: Int) -> String { n <= 10 ? "v2" : "v3" }
    static func employeeAuth(_ n: Int) -> String { ["email", "google", "apple"][n % 3] }

    var events: [SeedEvent] = []

    init() {
        let t0 = Self.t0
        func seconds(_ s: Int) -> Int64 { Int64(s) * 1_000_000 }
        // yoked: y1 and y4 complete; y2 stops after phone_entered; y3 after profile_created.
        let yoked: [(String, String, [Int])] = [
            ("y1", Self.iOS23, [0, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600]),
            ("y2", Self.android22, [0, 40]),
            ("y3", Self.iOS23, [0, 20, 30, 100, 330]),
            ("y4", Self.iOS22, [0, 30, 60, 300, 660, 700, 760, 800, 900, 950, 1000, 1100]),
        ]
        for (person, context, offsets) in yoked {
            for (i, offset) in offsets.enumerated() {
                events.append(SeedEvent(app: "yoked", messageId: "\(person)-\(i)", event: Self.yokedSteps[i], anonymousId: person,
                                        timestamp: t0 + seconds(offset), context: context))
            }
        }
        // What y2 and y3 did after their last step: y2's code failed twice, then help; y3's photo upload failed.
        for (person, name, offset, context) in [
            ("y2", "otp_failed", 70, Self.android22), ("y2", "otp_failed", 100, Self.android22), ("y2", "help_opened", 130, Self.android22),
            ("y3", "photo_upload_failed", 400, Self.iOS23),
        ] {
            events.append(SeedEvent(app: "yoked", messageId: "\(person)-after-\(offset)", event: name, anonymousId: person,
                                    timestamp: t0 + seconds(offset), context: context))
        }
        // ops company creators: c1 stuck at companyDetails three days ago, c2 reached it two hours ago, c3 done.
        let now = Timestamps.microseconds(Date())
        let creators: [(String, Int64, Int)] = [("c1", t0, 6), ("c2", now - seconds(7200) - seconds(600), 6), ("c3", t0, 9)]
        for (person, start, count) in creators {
            for i in 0..<count {
                events.append(SeedEvent(app: "ops", type: "screen", messageId: "\(person)-\(i)", event: Self.creatorScreens[i],
                                        anonymousId: person, timestamp: start + seconds(i * 100),
                                        properties: #"{"flow": "company_creator"}"#))
            }
        }
        // ops employees, with auth method and flow version on every screen.
        for n in 1...20 {
            let count = Self.employeeCompletes(n) ? Self.employeeScreens.count : 3
            for i in 0..<count {
                events.append(SeedEvent(
                    app: "ops", type: "screen", messageId: "e\(n)-\(i)", event: Self.employeeScreens[i], anonymousId: "e\(n)",
                    timestamp: t0 + seconds(n * 1000 + i * 60),
                    properties: #"{"flow": "employee", "auth_method": "\#(Self.employeeAuth(n))", "flow_version": "\#(Self.employeeVersion(n))"}"#,
                    context: n % 2 == 0 ? Self.android22 : Self.iOS23))
            }
        }
        // umuve: u1 swipes to page 3 and finishes; u2 skips and signs in; u3 skips and stops; u4 only sees page 1.
        let umuve: [(String, [(String, String)])] = [
            ("u1", [("onboarding_screen_viewed", #"{"page": 1}"#), ("onboarding_screen_viewed", #"{"page": 2}"#),
                    ("onboarding_screen_viewed", #"{"page": 3}"#), ("apple_sign_in_completed", "{}"), ("main_screen_viewed", "{}")]),
            ("u2", [("onboarding_screen_viewed", #"{"page": 1}"#), ("onboarding_skipped", "{}"), ("apple_sign_in_completed", "{}")]),
            ("u3", [("onboarding_screen_viewed", #"{"page": 1}"#), ("onboarding_skipped", "{}")]),
            ("u4", [("onboarding_screen_viewed", #"{"page": 1}"#)]),
        ]
        let formaStart = t0 - 7 * Self.day
        let formaSteps = ["welcome", "folders", "quiz", "folderTemplates", "preview"]
        for (person, version, steps, activeDays) in Self.formaPersons {
            let context = #"{"os": {"name": "macOS"}, "app": {"version": "\#(version)"}}"#
            for i in 0..<steps {
                let completion = i == formaSteps.count
                events.append(SeedEvent(
                    app: "forma", messageId: "\(person)-\(i)", event: completion ? "onboarding_completed" : "onboarding_step_viewed",
                    anonymousId: person, timestamp: formaStart + seconds(i * 45),
                    properties: completion ? "{}" : #"{"step": "\#(formaSteps[i])"}"#, context: context))
            }
            for day in activeDays {
                events.append(SeedEvent(app: "forma", messageId: "\(person)-day-\(day)", event: "folder_created", anonymousId: person,
                                        timestamp: formaStart + Int64(day) * Self.day + seconds(3600), context: context))
            }
        }
        for (person, steps) in umuve {
            for (i, (name, properties)) in steps.enumerated() {
                events.append(SeedEvent(app: "umuve", messageId: "\(person)-\(i)", event: name, anonymousId: person,
                                        timestamp: t0 + seconds(i * 15), properties: properties))
            }
        }
    }

    /// forma persons who started a week before the others (ten days ago), with
    /// the days they came back on: f1, f2 and f3 complete; f4 stops at quiz,
    /// f5 at folders, f6 at welcome. Active on day 7 (7 to 8 days after
    /// their start): f1, f2, f3 and f6; f4 only on day 1.
    static let formaPersons: [(person: String, version: String, steps: Int, activeDays: [Int])] = [
        ("f1", "1.0.3", 6, [7]), ("f2", "1.0.3", 6, [1, 7]), ("f3", "1.0.2", 6, [7]),
        ("f4", "1.0.2", 3, [1]), ("f5", "1.0.3", 2, []), ("f6", "1.0.3", 1, [7]),
    ]

    /// Writes the events and three quarantined messages.
    func insert(_ c: Connection) throws {
        try EventSeeder.insert(c, events)
        for (app, code) in [("yoked", "invalid_timestamp"), ("yoked", "invalid_timestamp"), ("ops", "missing_identity")] {
            try c.query(
                "INSERT INTO quarantine (app, reason_code, reason, raw) VALUES ($1, $2, $3, $4)",
                [.text(app), .text(code), .text("test: \(code)"), .text(#"{"type": "track", "phone": "+15550100"}"#)])
        }
    }
}
