import Access
import Explore
import Foundation
import Funnels
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// Query time follows the grants (docs/access.md): each login answers only
/// for its apps, an app not granted reads as one that does not exist, each
/// login keeps stores of its own, and a revoked app's store is deleted.
@Suite("query time under per-app grants")
struct GrantedAppsTests {
    static func funnel(_ app: String) -> Funnel {
        Funnel(name: "f", app: app, windowSeconds: 3_600, steps: [FunnelStep(.event("a")), FunnelStep(.event("b"))])
    }

    @Test("a login answers for its apps alone, in stores of its own; an ungranted app is an unknown one; a revoked app's store is deleted")
    func grantsAtQueryTime() async throws {
        let db = try await TestDatabase.create()
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("explore-grants-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let now = Timestamps.microseconds(Date())
        let (one, both) = ("\(db.name)_one", "\(db.name)_both")
        try await db.pool(maxConnections: 1).withConnection { c in
            try EventSeeder.insert(c, ["x", "y"].flatMap { app in
                (0..<5).flatMap { person in
                    [SeedEvent(app: app, event: "a", anonymousId: "\(app)\(person)", timestamp: now - 7_200_000_000),
                     SeedEvent(app: app, event: "b", anonymousId: "\(app)\(person)", timestamp: now - 7_100_000_000)]
                }
            })
            try AppGrants.createLogin(c, name: one, password: "p", .apps(["x"]))
            try AppGrants.createLogin(c, name: both, password: "p", .apps(["x", "y"]))
        }
        let explorer = Explorer(cacheRoot: cache)
        func answer(_ login: String, _ app: String) throws -> FunnelAnswer {
            let c = try Connection.connect(try db.url(as: login))
            return try explorer.answer(FunnelQuery(funnel: Self.funnel(app), timeZone: "UTC", now: now), on: c)
        }
        let asOne = try answer(one, "x")
        let asBoth = try answer(both, "x")
        #expect(asOne.report == asBoth.report && asOne.events == 10 && asOne.storeRebuilt && asBoth.storeRebuilt, "each reads its own store")
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.path).count == 2)
        #expect(try answer(both, "y").events == 10)
        // Not granted, and not there: the same refusal.
        #expect(throws: ExploreError.unknownApp("y")) { try answer(one, "y") }
        #expect(throws: ExploreError.unknownApp("z")) { try answer(one, "z") }
        #expect(ExploreError.unknownApp("y").description.replacingOccurrences(of: "'y'", with: "'z'") == ExploreError.unknownApp("z").description)
        // Revoked: the next query is refused, and the login's store of the app is gone; the other login's stays.
        func stores() throws -> [String] {
            try FileManager.default.subpathsOfDirectory(atPath: cache.path).filter { $0.hasSuffix("manifest.json") }.sorted()
        }
        #expect(try stores().count == 3)
        try AppGrants.revoke(try Connection.connect(db.url), login: one, .apps(["x"]))
        #expect(throws: ExploreError.unknownApp("x")) { try answer(one, "x") }
        #expect(try stores().count == 2)
        #expect(try answer(both, "x").storeRebuilt == false)
        // An erasure in y starts y's store again, not x's: each store watches its own app's erasures.
        try Connection.connect(db.url).query("INSERT INTO privacy_requests (kind, app, requested_by, id_hashes) VALUES ('erase', 'y', 't', '{}')")
        #expect(try answer(both, "x").storeRebuilt == false)
        #expect(try answer(both, "y").storeRebuilt == true)
        try await db.drop()
        try await ConnectionPool.using(url: db.adminURL) { admin in
            for login in [one, both] { try await admin.query("DROP ROLE \"\(login)\"") }
        }
    }
}
