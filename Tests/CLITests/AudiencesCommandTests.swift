import Foundation
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// `onramp audiences` as an operator runs it (docs/audiences.md).
@Suite("onramp audiences")
struct AudiencesCommandTests {
    static let funnels = AudienceReference.signupConfiguration

    static func write(_ text: String) throws -> URL {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("audiences-\(UUID().uuidString).yaml")
        try text.write(to: file, atomically: true, encoding: .utf8)
        return file
    }

    @Test("run keeps them and says what changed; list, show and export read them; a bad audience or a missing secret stops it before anything is written; a held lock is skipped")
    func commands() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let now = Timestamps.microseconds(Date())
        // Ten start, four of them go on to the phone step two hours ago and stop.
        let events = (0..<10).flatMap { p -> [SeedEvent] in
            [SeedEvent(app: "yoked", messageId: "s\(p)", event: "started", userId: "u\(p)", timestamp: now - 3 * 3_600_000_000)]
                + (p < 4 ? [SeedEvent(app: "yoked", messageId: "p\(p)", event: "phone_entered", userId: "u\(p)", timestamp: now - 2 * 3_600_000_000)] : [])
        }
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        let written = "SELECT (SELECT count(*) FROM audience_definitions) + (SELECT horizon_txid FROM projection_checkpoint)"
        let noSecret = ["ONRAMP_DELIVERY_SECRET": ""]

        let bad = try Self.write(Self.funnels + "  - {name: stuck, funnel: signup, stalled: {step: 3, for: 1h}}\n")
        let refused = try OnrampBinary.run(["audiences", "run", "--database-url", db.url, "--config", bad.path], environment: noSecret)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("\(bad.lastPathComponent): audience 'stuck', stalled.step: step 3 is the last required step"), "\(refused.stderr)")
        #expect(try await pool.query(written).scalar(Int.self) == 0)

        let delivering = try Self.write(Self.funnels + "  - {name: stuck, funnel: signup, stalled: {step: 2, for: 1h}, deliver: {url: 'http://127.0.0.1:9/'}}\n")
        let unsigned = try OnrampBinary.run(["audiences", "run", "--database-url", db.url, "--config", delivering.path], environment: noSecret)
        #expect(unsigned.status != 0)
        #expect(unsigned.stderr.contains("audience 'stuck': deliver: no signing secret (set $ONRAMP_DELIVERY_SECRET, or deliver.secret_file)"), "\(unsigned.stderr)")
        #expect(try await pool.query(written).scalar(Int.self) == 0)

        let good = try Self.write(Self.funnels + """
              - {name: stuck, funnel: signup, stalled: {step: 2, for: 1h}}
              - {name: started, funnel: signup, outcome: reached, step: 1}

            """)
        let run = try OnrampBinary.run(["audiences", "run", "--database-url", db.url, "--config", good.path], environment: noSecret)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("audiences: 14 entered, 0 left (14 new events"), "\(run.stdout)")
        let again = try OnrampBinary.run(["audiences", "run", "--database-url", db.url, "--config", good.path], environment: noSecret)
        #expect(again.stdout.contains("audiences: 0 entered, 0 left (nothing new since the last run)"), "\(again.stdout)")

        let list = try OnrampBinary.run(["audiences", "list", "--database-url", db.url])
        #expect(list.stdout.contains("stuck\t4 persons\tpersons of yoked: funnel signup: stalled at step 2 for 1h"), "\(list.stdout)")
        let show = try OnrampBinary.run(["audiences", "show", "stuck", "--database-url", db.url, "--json"])
        let shown = try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any]
        #expect(shown?["members"] as? Int == 4)
        #expect((shown?["changes"] as? [[String: Any]])?.count == 4)
        let csv = try OnrampBinary.run(["audiences", "export", "stuck", "--database-url", db.url])
        let lines = csv.stdout.split(separator: "\n")
        #expect(lines.first == "person_id,entered_at")
        #expect(Set(lines.dropFirst().map { String($0.split(separator: ",")[0]) }) == ["u0", "u1", "u2", "u3"])
        let json = try OnrampBinary.run(["audiences", "export", "started", "--format", "json", "--database-url", db.url])
        #expect((try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])?.count == 10)
        let unknown = try OnrampBinary.run(["audiences", "show", "nope", "--database-url", db.url])
        #expect(unknown.status != 0)
        #expect(unknown.stderr.contains("no audience 'nope' (the last run kept started, stuck)"), "\(unknown.stderr)")

        // At query time: the stuck four, and the six others.
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("audiences-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let ask = ["funnel", "--database-url", db.url, "--app", "yoked", "--step", "started", "--step", "phone_entered",
                   "--cache", cache.path, "--quiet", "--format", "json"]
        for (flags, started) in [(["--audience", "stuck"], 4), (["--not-audience", "stuck"], 6)] {
            let asked = try OnrampBinary.run(ask + flags)
            #expect(asked.status == 0, "\(asked.stderr)")
            let report = try JSONSerialization.jsonObject(with: Data(asked.stdout.utf8)) as? [String: Any]
            #expect(report?["started"] as? Int == started, "\(flags)")
            let query = report?["query"] as? [String: Any]
            #expect((query?["audiences"] as? [String] ?? []) + (query?["not_audiences"] as? [String] ?? []) == ["stuck"])
        }
        let nobody = try OnrampBinary.run(ask + ["--audience", "nobody"])
        #expect(nobody.status != 0)
        #expect(nobody.stderr.contains("audience: unknown audience 'nobody' of app 'yoked'"), "\(nobody.stderr)")

        // A night holding the job's lock: the run says so and exits 0.
        var holder: Connection? = try Connection.connect(db.url)
        _ = try holder?.query("SELECT pg_advisory_lock($1)", [.int(0x6f6e_7261_6d70_02)])
        let skipped = try OnrampBinary.run(["audiences", "run", "--database-url", db.url, "--config", good.path], environment: noSecret)
        #expect(skipped.status == 0)
        #expect(skipped.stdout.contains("skipped: another run holds the job's lock"), "\(skipped.stdout)")
        holder = nil  // its session ends, and the lock with it
        for file in [bad, delivering, good] { try? FileManager.default.removeItem(at: file) }
        await pool.close()
        try await db.drop()
    }
}
