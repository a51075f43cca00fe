import Foundation
import Testing
@testable import Funnels

@Suite("what a funnel's stored rows are built from")
struct FunnelDefinitionTests {
    static let yoked: Funnel = {
        guard let funnel = try? FunnelConfiguration.default().funnel(named: "yoked_onboarding") else { fatalError("bundled funnel") }
        return funnel
    }()

    @Test("stored as JSON with snake-case keys, read back equal; the same definition gives the same text and fingerprint")
    func roundTrip() throws {
        let definition = FunnelDefinition(Self.yoked, timeZone: "UTC")
        let json = definition.json
        #expect(json.contains(#""window_seconds":86400"#) && json.contains(#""time_zone":"UTC""#))
        #expect(FunnelDefinition(json: json) == definition)
        #expect(FunnelDefinition(Self.yoked, timeZone: "UTC").json == json)
        #expect(definition.fingerprint.count == 16 && definition.fingerprint.allSatisfy(\.isHexDigit))
        #expect(FunnelDefinition(json: "{\"app\": 1}") == nil)
        // Stored before the options existed: read with their defaults, equal to today's plain definition.
        var older = json.replacingOccurrences(of: #","order":"ordered""#, with: "").replacingOccurrences(of: #""attribution":"first_step","#, with: "")
        older = older.replacingOccurrences(of: #","hold":[]"#, with: "").replacingOccurrences(of: #""ignore":[],"#, with: "")
        #expect(!older.contains("order") && !older.contains("attribution") && !older.contains("hold") && !older.contains("ignore"), "\(older)")
        #expect(FunnelDefinition(json: older) == definition)
        let oldExclusions = #"{"active_events":[],"app":"a","breakdowns":[],"engine":1,"exclusions":[{"kind":"event","name":"x","where":{}}],"retention_days":[1],"steps":[],"time_zone":"UTC","window_seconds":60}"#
        #expect(FunnelDefinition(json: oldExclusions)?.exclusions.first?.matcher.name == "x")
    }

    @Test("settings that only read the stored rows are not part of it")
    func reportOnlySettingsLeftOut() {
        var edited = Self.yoked
        edited.targets = []
        edited.minSupport = 3
        edited.alerts.alpha = 0.01
        #expect(FunnelDefinition(edited, timeZone: "UTC") == FunnelDefinition(Self.yoked, timeZone: "UTC"))
    }

    @Test("each change is said in the configuration's words")
    func changesInWords() {
        let old = FunnelDefinition(Self.yoked, timeZone: "UTC")
        func said(_ zone: String = "UTC", _ edit: (inout Funnel) -> Void) -> [String] {
            var funnel = Self.yoked
            edit(&funnel)
            return FunnelDefinition(funnel, timeZone: zone).changes(since: old)
        }
        #expect(said { _ in } == [])
        #expect(said { $0.windowSeconds = 3_600 } == ["window 24h → 1h"])
        #expect(said { $0.windowSeconds = 7 * 86_400 } == ["window 24h → 7d"])
        #expect(said { $0.windowSeconds = 90 } == ["window 24h → 90s"])
        #expect(said("Europe/Berlin") { _ in } == ["time zone UTC → Europe/Berlin"])
        #expect(said { $0.steps.removeLast() } == ["steps 12 → 11"])
        #expect(said { $0.steps[1].matchers[0].conditions["properties.method"] = "sms" }
            == ["step 2 event phone_entered → event phone_entered where properties.method = sms"])
        #expect(said { $0.steps[2].isOptional = true } == ["step 3 event otp_verified → optional event otp_verified"])
        #expect(said { $0.steps[2].name = "otp" }.first?.hasPrefix("step names ") == true)
        #expect(said { $0.exclusions = [.event("account_deleted")] } == ["exclusion added: event account_deleted"])
        #expect(said { $0.breakdowns.append("properties.auth_method") } == ["breakdown added: properties.auth_method"])
        #expect(said { $0.breakdowns.reverse() } == ["breakdowns reordered: context.app.version, context.os.name"])
        #expect(said { $0.breakdowns = ["context.locale"] }
            == ["breakdown added: context.locale", "breakdowns removed: context.os.name; context.app.version"])
        #expect(said { $0.retention.days = [1, 7] } == ["retention days 1, 7, 30 → 1, 7"])
        #expect(said { $0.app = "other" } == ["app yoked → other"])
        #expect(said { $0.order = .strict; $0.ignore = [.event("heartbeat")] } == ["order ordered → strict", "ignored event added: event heartbeat"])
        #expect(said { $0.steps[2].within = 120 } == ["step 3 event otp_verified → event otp_verified within 2m"])
        #expect(said { $0.hold = ["context.device.id"] } == ["held path added: context.device.id"])
        #expect(said { $0.attribution = .step(1) } == ["attribution first_step → step 2"])
        #expect(said { $0.exclusions = [Exclusion(.event("x"), between: 1...2)] } == ["exclusion added: event x between steps 2 and 3"])
        var older = old
        older.engine = 0
        #expect(FunnelDefinition(Self.yoked, timeZone: "UTC").changes(since: older) == ["engine rules 0 → 1"])
    }
}
