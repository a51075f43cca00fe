import EventLog
import Foundation
import NIOHTTP1
import IngestServer
import LibPQ
import LocalPostgres
import Migrations
import NIOConcurrencyHelpers
import TestSupport
import Testing

@Suite struct LoadTests {
    /// 200 clients × 100 batches each, all at once, retrying 503s: every batch
    /// is acknowledged in the end, every acknowledged id is in the log exactly
    /// once, and nothing unacknowledged slipped in.
    @Test func twoHundredClientsHundredBatchesEach() async throws {
        try await withServer(configure: { $0.rateLimitPerSecond = 1e6; $0.rateLimitBurst = 1e6; $0.poolSize = 4 }) { h in
            let acknowledged = try await withThrowingTaskGroup(of: [String].self) { group in
                for client in 0..<200 {
                    group.addTask {
                        var ids: [String] = []
                        for batch in 0..<100 {
                            let batchIDs = (0..<2).map { "c\(client)-b\(batch)-m\($0)" }
                            // Every fifth batch repeats the previous one's first id: a duplicate.
                            var messages = batchIDs.map { Fixtures.track($0, anonymousId: "dev-\(client)") }
                            if batch % 5 == 4 { messages.append(Fixtures.track("c\(client)-b\(batch - 1)-m0", anonymousId: "dev-\(client)")) }
                            // A 503 (the writer failing fast, e.g. a pool timeout on a slow
                            // machine) is retried after Retry-After, as the SDK does.
                            for _ in 0..<50 {
                                let reply = try await h.post(json: Fixtures.batch(messages))
                                if reply.status == 200 { ids += batchIDs }
                                guard reply.status == 503 else { break }
                                try await Task.sleep(for: .seconds(Double(reply.header("Retry-After") ?? "1") ?? 1))
                            }
                        }
                        return ids
                    }
                }
                return try await group.reduce(into: [String]()) { $0 += $1 }
            }
            #expect(acknowledged.count == 200 * 100 * 2)
            let stored = try await h.pool.query("SELECT message_id, count(*) FROM events GROUP BY message_id").rows
            var table: [String: Int] = [:]
            for row in stored { table[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1) }
            #expect(Set(acknowledged) == Set(table.keys))
            #expect(table.values.allSatisfy { $0 == 1 })
            let metrics = try await h.send(.GET, "/metrics").body
            #expect(metrics.contains("onramp_group_commit_requests"))
        }
    }
}

@Suite struct FaultTests {
    /// Runs on a private cluster of its own, so pausing it cannot disturb
    /// other suites; skipped (and said so) when the tests use an external server.
    @Test(.enabled(if: (ProcessInfo.processInfo.environment["ONRAMP_TEST_DATABASE_URL"] ?? "").isEmpty,
                   "ONRAMP_TEST_DATABASE_URL points at an external server this test cannot stop"))
    func databaseStoppedMidRunGives503sThenRecovers() async throws {
        let cluster = try LocalCluster.start()
        defer { cluster.stop() }
        let admin = ConnectionPool(url: cluster.url(), maxConnections: 1)
        try await admin.query("CREATE DATABASE faults")
        await admin.close()
        let migrator = try Migrator(directory: try TestDatabase.migrationsDirectory)
        let setup = ConnectionPool(url: cluster.url(database: "faults"), maxConnections: 1)
        _ = try await setup.withConnection { try migrator.migrate($0) }
        await setup.close()
        try await withServer(databaseURL: cluster.url(database: "faults"), configure: { $0.databaseBackoff = .milliseconds(300) }) { h in
            let statuses = Locked<[Int: Int]>([:])
            let acknowledged = Locked<[String]>([])
            let stop = Locked(false)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for client in 0..<8 {
                    group.addTask {
                        var n = 0
                        while !stop.withLock({ $0 }) {
                            n += 1
                            let id = "f\(client)-\(n)"
                            let started = ContinuousClock.now
                            guard let reply = try? await h.post(json: Fixtures.batch([Fixtures.track(id)])) else { continue }
                            // Not a speed check: the database is paused for 2 s, so only a hang goes past 120 s (a loaded machine, every suite at once, has taken 55).
                            #expect(ContinuousClock.now - started < .seconds(120), "a request hung")
                            statuses.withLock { $0[reply.status, default: 0] += 1 }
                            if reply.status == 200 { acknowledged.withLock { $0.append(id) } }
                            if reply.status == 503 { #expect(reply.header("Retry-After") != nil) }
                            try await Task.sleep(for: .milliseconds(10))
                        }
                    }
                }
                try await Task.sleep(for: .seconds(1))
                try cluster.pause()
                try await Task.sleep(for: .seconds(2))
                let ready = try await h.send(.GET, "/readyz")
                #expect(ready.status == 503)
                try cluster.resume()
                try await Task.sleep(for: .seconds(3))
                stop.withLock { $0 = true }
                try await group.waitForAll()
            }
            let seen = statuses.withLock { $0 }
            #expect(seen[503, default: 0] > 0, "no 503 while the database was down: \(seen)")
            #expect(seen.keys.allSatisfy { $0 == 200 || $0 == 503 }, "unexpected statuses \(seen)")
            // Service resumed without a restart.
            #expect(try await h.post(json: Fixtures.batch([Fixtures.track("after")])).status == 200)
            let ids = acknowledged.withLock { $0 }
            let stored = try await h.count("SELECT count(*) FROM events WHERE message_id = ANY($1)", [.textArray(ids)])
            #expect(stored == ids.count)
        }
    }
}

/// A lock in a class, so concurrent test tasks can share it: a pthread lock,
/// since ThreadSanitizer cannot see Synchronization.Mutex on Linux.
final class Locked<Value: Sendable>: Sendable {
    private let box: NIOLockedValueBox<Value>
    init(_ value: Value) { box = NIOLockedValueBox(value) }
    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { box.withLockedValue { body(&$0) } }
}
