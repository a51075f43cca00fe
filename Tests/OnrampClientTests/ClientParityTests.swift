import Foundation
import LibPQ
import LocalPostgres
@testable import OnrampClient
import Testing

/// What an app gets without writing a line beyond `track`: the device's
/// context, lifecycle events, and the identity calls of analytics-swift, all
/// checked in the rows the real server stored.
@Suite("SDK parity with analytics-swift")
struct ClientParityTests {
    static func client(_ server: URL, _ key: String, storage: URL, _ adjust: (inout OnrampClient.Configuration) -> Void = { _ in }) throws
        -> OnrampClient
    {
        var configuration = OnrampClient.Configuration(writeKey: key, host: server)
        configuration.storageDirectory = storage
        configuration.flushInterval = nil
        configuration.log = { _ in }
        adjust(&configuration)
        return try OnrampClient(configuration: configuration)
    }

    static func storage() -> URL { FileManager.default.temporaryDirectory.appendingPathComponent("client-\(UUID().uuidString)") }

    @Test("with no context set by the app, a stored message carries library, os, device, locale and timezone; app values override, object by object")
    func automaticContext() async throws {
        try await ClientDeliveryTests.withDatabaseAndServer { db, server, key in
            let storage = Self.storage()
            defer { try? FileManager.default.removeItem(at: storage) }
            let plain = try Self.client(server, key, storage: storage) { $0.trackApplicationLifecycleEvents = false }
            plain.track("welcome_viewed")
            await plain.flush()

            let other = Self.storage()
            defer { try? FileManager.default.removeItem(at: other) }
            let branded = try Self.client(server, key, storage: other) {
                $0.trackApplicationLifecycleEvents = false
                $0.application = ApplicationInfo(name: "Forma", version: "2.4.0", build: "311", namespace: "com.example.forma")
                $0.context = ["app": ["version": "2.4.1"], "device": ["model": "iPhone15,2"], "campaign": ["name": "spring"]]
            }
            branded.track("welcome_viewed")
            await branded.flush()

            let pool = ConnectionPool(url: db.url, maxConnections: 1)
            let rows = try await pool.query(
                "SELECT anonymous_id, context::text, os_name, os_version, device_type, locale FROM analytics.events ORDER BY seq")
            try #require(rows.rows.count == 2)
            let first = rows.rows[0]
            let context = try #require(try JSONSerialization.jsonObject(with: Data(first.decode(String.self, at: 1).utf8)) as? [String: Any])
            print("context stored with none set by the app: \(try first.decode(String.self, at: 1))")
            #expect((context["library"] as? [String: Any])?["name"] as? String == "onramp-swift")
            #expect((context["library"] as? [String: Any])?["version"] as? String == OnrampClient.version)
            #expect(try first.decode(String?.self, at: 2) == AutomaticContext.osName)
            let version = ProcessInfo.processInfo.operatingSystemVersion
            #expect(try first.decode(String?.self, at: 3)?.hasPrefix("\(version.majorVersion).\(version.minorVersion)") == true)
            #expect(try first.decode(String?.self, at: 4) == AutomaticContext.osName.lowercased())
            #expect(try first.decode(String?.self, at: 5) == Locale.current.identifier(.bcp47))
            #expect(context["timezone"] as? String == TimeZone.current.identifier)
            #expect((context["device"] as? [String: Any])?["model"] as? String != nil)

            let second = try #require(try JSONSerialization.jsonObject(with: Data(rows.rows[1].decode(String.self, at: 1).utf8)) as? [String: Any])
            let app = try #require(second["app"] as? [String: Any])
            #expect(app["name"] as? String == "Forma")
            #expect(app["version"] as? String == "2.4.1", "the app's value wins")
            #expect(app["build"] as? String == "311")
            #expect(app["namespace"] as? String == "com.example.forma")
            #expect((second["device"] as? [String: Any])?["model"] as? String == "iPhone15,2")
            #expect((second["device"] as? [String: Any])?["type"] as? String == AutomaticContext.osName.lowercased(), "merged, not replaced")
            #expect((second["campaign"] as? [String: Any])?["name"] as? String == "spring")
            await pool.close()
        }
    }

    @Test("lifecycle: Installed and Opened on a first launch, Opened on the next, Updated with the previous version after an upgrade; Backgrounded flushes")
    func lifecycleEvents() async throws {
        try await ClientDeliveryTests.withDatabaseAndServer { db, server, key in
            let storage = Self.storage()
            defer { try? FileManager.default.removeItem(at: storage) }
            func launch(_ version: String, _ build: String) throws -> OnrampClient {
                try Self.client(server, key, storage: storage) {
                    $0.application = ApplicationInfo(name: "Yoked", version: version, build: build, namespace: "com.example.yoked")
                    $0.flushAt = 1_000
                }
            }
            let first = try launch("2.3.0", "230")
            first.track("welcome_viewed")
            first.applicationDidEnterBackground()  // flushes without being asked
            try await waitFor { first.statistics.queued == 0 && first.statistics.delivered == 4 }
            first.applicationWillEnterForeground()
            await first.flush()
            let again = try launch("2.3.0", "230")
            await again.flush()
            let upgraded = try launch("2.4.0", "240")
            await upgraded.flush()

            let pool = ConnectionPool(url: db.url, maxConnections: 1)
            let rows = try await pool.query("SELECT event, properties::text FROM events ORDER BY seq").rows
            let events = try rows.map { try $0.decode(String.self, at: 0) }
            #expect(events == [
                "Application Installed", "Application Opened", "welcome_viewed", "Application Backgrounded",
                "Application Opened",
                "Application Opened",
                "Application Updated", "Application Opened",
            ])
            func properties(_ i: Int) throws -> [String: Any] {
                try #require(try JSONSerialization.jsonObject(with: Data(rows[i].decode(String.self, at: 1).utf8)) as? [String: Any])
            }
            #expect(try properties(0)["version"] as? String == "2.3.0")
            #expect(try properties(0)["build"] as? String == "230")
            #expect(try properties(1)["from_background"] as? Bool == false)
            #expect(try properties(4)["from_background"] as? Bool == true)
            let updated = try properties(6)
            #expect(updated["version"] as? String == "2.4.0")
            #expect(updated["previous_version"] as? String == "2.3.0")
            #expect(updated["previous_build"] as? String == "230")
            await pool.close()
        }
    }

    @Test("identify, alias, group, reset and opting out, as the server stores them")
    func identityCalls() async throws {
        try await ClientDeliveryTests.withDatabaseAndServer { db, server, key in
            let storage = Self.storage()
            defer { try? FileManager.default.removeItem(at: storage) }
            let client = try Self.client(server, key, storage: storage) { $0.trackApplicationLifecycleEvents = false }
            let device = client.anonymousId
            client.track("welcome_viewed")
            client.identify(userId: "user-1", traits: ["plan": "free"])
            client.identify(userId: "user-1", traits: ["email_verified": true])
            #expect(client.traits == ["plan": "free", "email_verified": true], "traits accumulate")
            client.group("team-9", traits: ["seats": 5])
            client.alias("user-1-new")
            client.track("profile_created")
            // Opted out: nothing is recorded, and it stays so after a relaunch.
            client.isEnabled = false
            client.track("secret_event")
            let relaunched = try Self.client(server, key, storage: storage) { $0.trackApplicationLifecycleEvents = false }
            #expect(!relaunched.isEnabled)
            #expect(relaunched.userId == "user-1-new", "the user id survives a relaunch")
            relaunched.track("still_secret")
            relaunched.isEnabled = true
            // Logout: a new anonymous id and no user.
            relaunched.reset()
            #expect(relaunched.anonymousId != device)
            #expect(relaunched.userId == nil && relaunched.traits.isEmpty)
            relaunched.track("welcome_viewed")
            await relaunched.flush()

            let pool = ConnectionPool(url: db.url, maxConnections: 1)
            let rows = try await pool.query(
                """
                SELECT type, coalesce(event, ''), anonymous_id, coalesce(user_id, ''), coalesce(traits::text, ''),
                       coalesce(previous_id, ''), coalesce(group_id, '')
                FROM events ORDER BY seq
                """
            ).rows.map { row in try (0..<7).map { try row.decode(String.self, at: $0) } }
            let expected: [[String]] = [
                ["track", "welcome_viewed", device, ""],
                ["identify", "", device, "user-1"],
                ["identify", "", device, "user-1"],
                ["group", "", device, "user-1"],
                ["alias", "", device, "user-1-new"],
                ["track", "profile_created", device, "user-1-new"],
                ["track", "welcome_viewed", relaunched.anonymousId, ""],
            ]
            #expect(rows.map { Array($0.prefix(4)) } == expected)
            #expect(rows[3][4].contains("\"seats\": 5"), "the group's traits: \(rows[3][4])")
            #expect(rows[3][6] == "team-9" && rows[4][5] == "user-1", "the group's id and the alias's previous id: \(rows[3]), \(rows[4])")
            await pool.close()
        }
    }
}

/// Polls `condition` for up to 120 s: the whole suite may run beside it, and
/// on a loaded machine a delivery can outlast the client's 30 s request
/// timeout twice before a retry gets through.
func waitFor(_ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(120)
    while !condition() {
        try #require(ContinuousClock.now < deadline, "timed out")
        try await Task.sleep(for: .milliseconds(20))
    }
}
