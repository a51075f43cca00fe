import EventLog
import Foundation
import IngestServer
import LibPQ
import LocalPostgres
import Logging
import OnrampClient
import ServiceLifecycle
import Migrations
import NIOConcurrencyHelpers
import Testing

/// The SDK against the real server over HTTP, with a real PostgreSQL.
@Suite("OnrampClient delivery", .serialized)
struct ClientDeliveryTests {
    /// A running `onramp serve` (in-process) on a database, for the body's duration.
    static func withServer(databaseURL: String, _ body: @Sendable (URL, String) async throws -> Void) async throws {
        let (ports, sink) = AsyncStream.makeStream(of: Int.self)
        var configuration = IngestConfiguration(databaseURL: databaseURL)
        configuration.port = 0
        configuration.databaseBackoff = .milliseconds(200)
        // Refusals answered at once: pacing them has its own test (RefusalPauseTests).
        configuration.refusalPause = .zero
        var logger = Logger(label: "client-tests")
        logger.logLevel = .critical
        configuration.logger = logger
        configuration.migrationsDirectory = try TestDatabase.migrationsDirectory
        configuration.onServerRunning = { port in
            sink.yield(port)
            sink.finish()
        }
        let app = try await buildApplication(configuration: configuration)
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        let pool = ConnectionPool(url: databaseURL, maxConnections: 1)
        let key = try await WriteKeyStore(pool: pool).create(app: "yoked")
        await pool.close()
        let outcome: Result<Void, any Error> = await withTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try? await group.run() }
            var port = 0
            for await p in ports { port = p }
            defer { Task { await group.triggerGracefulShutdown() } }
            do {
                try await body(URL(string: "http://127.0.0.1:\(port)")!, key)
                await group.triggerGracefulShutdown()
                return .success(())
            } catch {
                await group.triggerGracefulShutdown()
                return .failure(error)
            }
        }
        try outcome.get()
    }

    /// A fresh database with the server over it for the body's duration; the database is dropped afterwards.
    static func withDatabaseAndServer(_ body: @Sendable (TestDatabase, URL, String) async throws -> Void) async throws {
        let db = try await TestDatabase.create()
        try await withServer(databaseURL: db.url) { server, key in try await body(db, server, key) }
        try await db.drop()
    }

    static var probe: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("onramp-client-probe")
    }

    @Test("an app killed with events queued: a new client instance delivers every tracked event exactly once")
    func killedAppDeliversExactlyOnce() async throws {
        try await ClientDeliveryTests.withDatabaseAndServer { db, server, key in
            let storage = FileManager.default.temporaryDirectory.appendingPathComponent("probe-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: storage) }
            // The app tracks events while its background flushes run; it is killed part way,
            // once it has tracked 250 and some have been delivered (however slow the machine).
            let process = Process()
            process.executableURL = Self.probe
            process.arguments = [server.absoluteString, key, storage.path, "50000"]  // far more than it gets to track before the kill
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            var ledger = Set<Int>()
            var delivered = 0
            var pending = ""
            let handle = output.fileHandleForReading
            while ledger.count < 250 || delivered == 0 {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending += String(decoding: chunk, as: UTF8.self)
                var lines = pending.split(separator: "\n", omittingEmptySubsequences: false)
                pending = String(lines.removeLast())  // a partial line waits for the next chunk
                for line in lines where line.hasPrefix("tracked ") {
                    let words = line.split(separator: " ")
                    if words.count >= 6, let n = Int(words[1]), let d = Int(words[5]) {
                        ledger.insert(n)
                        delivered = max(delivered, d)
                    }
                }
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            #expect(process.terminationReason == .uncaughtSignal)
            #expect(ledger.count >= 250)

            let pool = ConnectionPool(url: db.url, maxConnections: 1)
            let before = try await pool.query("SELECT count(*) FROM events").scalar(Int.self)
            // A new instance of the app finds the queue on disk and delivers it.
            var configuration = OnrampClient.Configuration(writeKey: key, host: server)
            configuration.trackApplicationLifecycleEvents = false
            configuration.storageDirectory = storage
            configuration.flushInterval = nil
            configuration.log = { _ in }
            let revived = try OnrampClient(configuration: configuration)
            #expect(revived.statistics.queued > 0 || before >= ledger.count)
            await revived.flush()
            #expect(revived.statistics.queued == 0)

            let rows = try await pool.query(
                "SELECT (properties->>'n')::int AS n, count(*) AS copies FROM events GROUP BY 1 ORDER BY 1")
            let stored = Dictionary(uniqueKeysWithValues: try rows.rows.map { (try $0.decode(Int.self, "n"), try $0.decode(Int.self, "copies")) })
            #expect(stored.values.allSatisfy { $0 == 1 }, "some event was stored twice")
            #expect(ledger.isSubset(of: Set(stored.keys)), "tracked but lost: \(ledger.subtracting(stored.keys).sorted().prefix(10))")
            #expect(Set(stored.keys).subtracting(ledger).count <= 1)  // at most the one tracked as the kill landed
            #expect(before > 0, "the killed app had delivered nothing: the test did not exercise a kill mid-delivery")
            await pool.close()
        }
    }

    @Test("the server answers 503 while the database is down; the client backs off, retries, and delivers everything",
          .enabled(if: (ProcessInfo.processInfo.environment["ONRAMP_TEST_DATABASE_URL"] ?? "").isEmpty,
                   "needs a private cluster it can stop; unset ONRAMP_TEST_DATABASE_URL to run it"))
    func serviceUnavailableThenRecovers() async throws {
        let cluster = try LocalCluster.start()
        defer { cluster.stop() }
        let admin = ConnectionPool(url: cluster.url(), maxConnections: 1)
        try await admin.query("CREATE DATABASE client_recovery")
        await admin.close()
        let url = cluster.url(database: "client_recovery")
        let migrator = try Migrator(directory: try TestDatabase.migrationsDirectory)
        let setup = ConnectionPool(url: url, maxConnections: 1)
        _ = try await setup.withConnection { try migrator.migrate($0) }
        await setup.close()

        try await Self.withServer(databaseURL: url) { server, key in
            let storage = FileManager.default.temporaryDirectory.appendingPathComponent("client-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: storage) }
            var configuration = OnrampClient.Configuration(writeKey: key, host: server)
            configuration.trackApplicationLifecycleEvents = false
            configuration.storageDirectory = storage
            configuration.flushInterval = nil
            configuration.flushAt = 10_000
            configuration.retryBaseDelay = .milliseconds(200)
            configuration.maxRetryDelay = .seconds(1)
            configuration.maxAttemptsPerFlush = 100
            let log = LogLines()
            configuration.log = { log.append($0) }
            let client = try OnrampClient(configuration: configuration)
            try cluster.pause()  // the database goes away
            for i in 0..<120 { client.track("otp_verified", properties: ["n": .number(Double(i))]) }
            let flushing = Task { await client.flush() }
            // However slow the machine (ThreadSanitizer makes it ~10× slower), the
            // client must meet a 503 while the database is away, and keep everything.
            let deadline = ContinuousClock.now + .seconds(120)
            while !log.lines.contains(where: { $0.contains("HTTP 503") }), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(log.lines.contains { $0.contains("HTTP 503") })
            #expect(client.statistics.queued == 120)
            #expect(client.statistics.failedAttempts >= 1)
            try cluster.resume()  // and comes back
            await flushing.value
            #expect(client.statistics.queued == 0)
            #expect(client.statistics.delivered == 120)
            let pool = ConnectionPool(url: url, maxConnections: 1)
            #expect(try await pool.query("SELECT count(DISTINCT properties->>'n') FROM events").scalar(Int.self) == 120)
            #expect(try await pool.query("SELECT count(*) FROM events").scalar(Int.self) == 120)
            await pool.close()
        }
    }

    @Test("a message the server rejects is dropped with a log line, not retried forever, and its batch delivered; a full queue drops the oldest")
    func rejectionsAndBoundedQueue() async throws {
        try await ClientDeliveryTests.withDatabaseAndServer { db, server, key in
            let storage = FileManager.default.temporaryDirectory.appendingPathComponent("client-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: storage) }
            var configuration = OnrampClient.Configuration(writeKey: key, host: server)
            configuration.trackApplicationLifecycleEvents = false
            configuration.storageDirectory = storage
            configuration.flushInterval = nil
            configuration.flushAt = 10_000
            configuration.maxQueueSize = 50
            let log = LogLines()
            configuration.log = { log.append($0) }
            let client = try OnrampClient(configuration: configuration)
            for i in 0..<60 { client.track("step_\(i)") }
            #expect(client.statistics.queued == 50)
            #expect(client.statistics.dropped == 10)
            // An event name the server refuses (over 200 characters) is quarantined and reported, the rest stored.
            // Queuing it pushes out one more of the oldest.
            client.track(String(repeating: "x", count: 300))
            #expect(client.statistics.dropped == 11)
            await client.flush()
            #expect(client.statistics.queued == 0)
            #expect(client.statistics.rejected == 1)
            #expect(client.statistics.delivered == 49)
            #expect(log.lines.contains { $0.contains("rejected") })
            let pool = ConnectionPool(url: db.url, maxConnections: 1)
            #expect(try await pool.query("SELECT count(*) FROM events").scalar(Int.self) == 49)
            #expect(try await pool.query("SELECT min(event) FROM events").scalar(String.self) == "step_11")
            #expect(try await pool.query("SELECT count(*) FROM quarantine").scalar(Int.self) == 1)
            await pool.close()
        }
    }
}

/// Collects the client's log lines across threads.
final class LogLines: Sendable {
    private let storage = NIOLockedValueBox<[String]>([])
    func append(_ line: String) { storage.withLockedValue { $0.append(line) } }
    var lines: [String] { storage.withLockedValue { $0 } }
}
