import Foundation
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// `onramp access` as an owner runs it, and `onramp funnel` as the logins it makes.
@Suite("onramp access")
struct AccessCommandTests {
    @Test("create-login reads the password from a file or standard input, never an option; grant, revoke and list; funnel refuses an ungranted app as an unknown one")
    func accessCommands() async throws {
        let db = try await TestDatabase.create()
        let (alice, bob) = ("\(db.name)_alice", "\(db.name)_bob")
        let t = Timestamps.microseconds(Date()) - 3_600_000_000
        try await db.pool(maxConnections: 1).withConnection { c in
            try EventSeeder.insert(c, ["yoked", "ops"].flatMap { app in
                [SeedEvent(app: app, event: "a", anonymousId: "d", timestamp: t), SeedEvent(app: app, event: "b", anonymousId: "d", timestamp: t + 1_000_000)]
            })
        }
        _ = try OnrampBinary.run(["keys", "create", "--app", "yoked", "--database-url", db.url])
        let passwordFile = FileManager.default.temporaryDirectory.appendingPathComponent("pw-\(UUID().uuidString)")
        try "first line\nsecond\n".write(to: passwordFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: passwordFile) }
        let made = try OnrampBinary.run(["access", "create-login", alice, "--app", "yoked", "--password-file", passwordFile.path, "--database-url", db.url])
        #expect(made.status == 0 && made.stderr.contains("may read yoked"), "\(made.stderr)")
        // From standard input; an empty one is refused, naming where the password goes.
        let onramp = OnrampBinary.url.path
        let piped = try ChildProcess.run(
            ["/bin/sh", "-c", "printf 's3cret\\n' | '\(onramp)' access create-login \(bob) --all-apps --database-url '\(db.url)'"])
        #expect(piped.exit.status == 0, "\(piped.output)")
        let empty = try ChildProcess.run(["/bin/sh", "-c", "'\(onramp)' access create-login \(db.name)_x --app ops --database-url '\(db.url)' </dev/null"])
        #expect(empty.exit.status != 0 && empty.output.contains("no password"), "\(empty.output)")
        #expect(try OnrampBinary.run(["access", "create-login", "\(db.name)_y", "--app", "ops", "--password", "x", "--database-url", db.url]).status != 0)

        let unknown = try OnrampBinary.run(["access", "grant", "--login", "\(db.name)_nobody", "--app", "ops", "--database-url", db.url])
        #expect(unknown.status != 0 && unknown.stderr.contains("no login named"), "\(unknown.stderr)")
        let typo = try OnrampBinary.run(["access", "grant", "--login", alice, "--app", "opz", "--database-url", db.url])
        #expect(typo.status == 0 && typo.stderr.contains("no write key names opz"), "\(typo.stderr)")
        let refused = try OnrampBinary.run(["access", "revoke", "--login", bob, "--app", "ops", "--database-url", db.url])
        #expect(refused.status != 0 && refused.stderr.contains("holds every app"), "\(refused.stderr)")
        let listed = try OnrampBinary.run(["access", "list", "--json", "--database-url", db.url])
        let grants = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        #expect(grants.filter { ($0["login"] as? String) == alice }.compactMap { $0["app"] as? String } == ["opz", "yoked"])
        #expect(grants.contains { ($0["login"] as? String) == bob && $0["app"] == nil })

        // onramp funnel as alice: her app answers; an app not granted and one that does not exist are refused alike.
        func funnel(_ app: String) throws -> OnrampBinary.Output {
            try OnrampBinary.run([
                "funnel", "--app", app, "--step", "a", "--step", "b", "--format", "json", "--quiet",
                "--cache", FileManager.default.temporaryDirectory.appendingPathComponent("access-cli-\(UUID().uuidString)").path,
                "--database-url", try db.url(as: alice),
            ])
        }
        #expect(try funnel("yoked").status == 0)
        let hidden = try funnel("ops"), missing = try funnel("nope")
        #expect(hidden.status != 0 && hidden.status == missing.status)
        #expect(hidden.stderr.replacingOccurrences(of: "'ops'", with: "'nope'") == missing.stderr, "\(hidden.stderr) vs \(missing.stderr)")
        try await db.drop()
        try await ConnectionPool.using(url: db.adminURL) { admin in
            for role in [alice, bob] { try await admin.query("DROP ROLE \"\(role)\"") }
        }
    }
}
