import AsyncHTTPClient
import Foundation
import Hummingbird
import LibPQ
import LocalPostgres
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
@testable import OnrampClient
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The failures public SDKs' queues have had, reproduced against the real
/// server: files that cannot be read, writes that fail, a batch refused for
/// one message, an answer lost after the server committed.
@Suite("the SDK's queue never stalls or loses")
struct QueueFailureTests {
    static func count(_ db: TestDatabase, _ sql: String) async throws -> Int {
        let pool = ConnectionPool(url: db.url, maxConnections: 1)
        defer { Task { await pool.close() } }
        return try await pool.query(sql).scalar(Int.self)
    }

    @Test("a half-written file, a file of garbage and one that is not a file are set aside, counted and logged; the rest is delivered")
    func unreadableFilesAreSetAside() async throws {
        try await ClientDeliveryTests.withDatabaseAndServer { db, server, key in
            let storage = ClientParityTests.storage()
            defer { try? FileManager.default.removeItem(at: storage) }
            let app = try ClientParityTests.client(server, key, storage: storage) { $0.trackApplicationLifecycleEvents = false }
            for i in 1...5 { app.track("step_\(i)") }
            let queue = storage.appendingPathComponent("queue")
            let files = try FileManager.default.contentsOfDirectory(at: queue, includingPropertiesForKeys: nil)
                .filter { $0.pathExtension == "json" }.sorted { $0.lastPathComponent < $1.lastPathComponent }
            try #require(files.count == 5)
            // The app dies mid-write of file 2, file 4 is overwritten with garbage, and a directory appears under a queue name.
            let whole = try Data(contentsOf: files[1])
            try whole.prefix(whole.count / 2).write(to: files[1])
            try Data((0..<300).map { _ in UInt8.random(in: 0...255) }).write(to: files[3])
            try FileManager.default.createDirectory(at: queue.appendingPathComponent("zz-not-a-file.json"), withIntermediateDirectories: false)

            let log = LogLines()
            let relaunched = try ClientParityTests.client(server, key, storage: storage) {
                $0.trackApplicationLifecycleEvents = false
                $0.log = { log.append($0) }
            }
            #expect(relaunched.statistics.queued == 6)
            await relaunched.flush()
            let statistics = relaunched.statistics
            #expect(statistics.queued == 0)
            #expect(statistics.delivered == 3)
            #expect(statistics.setAside == 3)
            #expect(log.lines.filter { $0.contains("set aside") }.count == 3, "\(log.lines)")
            let aside = try FileManager.default.contentsOfDirectory(atPath: queue.appendingPathComponent("set-aside").path)
            #expect(aside.count == 3, "kept for a look: \(aside)")
            #expect(try await Self.count(db, "SELECT count(*) FROM events WHERE event IN ('step_1', 'step_3', 'step_5')") == 3)
            #expect(try await Self.count(db, "SELECT count(*) FROM events") == 3)
            print("queue: set aside \(statistics.setAside) (\(aside.sorted().joined(separator: ", "))), delivered \(statistics.delivered); log: \(log.lines)")
        }
    }

    @Test("writes that fail (a queue directory turned read-only) keep messages in memory, in order, delivered and written again once possible; nothing is lost or stored twice")
    func failingWritesStayInMemory() async throws {
        try await ClientDeliveryTests.withDatabaseAndServer { db, server, key in
            let storage = ClientParityTests.storage()
            defer { try? FileManager.default.removeItem(at: storage) }
            let queue = storage.appendingPathComponent("queue")
            try FileManager.default.createDirectory(at: queue, withIntermediateDirectories: true)
            let readOnly = try ReadOnlySwitch(queue)
            defer { readOnly.release() }
            let log = LogLines()
            let app = try ClientParityTests.client(server, key, storage: storage) {
                $0.trackApplicationLifecycleEvents = false
                $0.log = { log.append($0) }
            }
            app.track("step_1")
            app.track("step_2")
            try readOnly.set(true)
            for i in 3...5 { app.track("step_\(i)") }
            #expect(app.statistics.queued == 5)
            #expect(app.statistics.inMemory == 3)
            #expect(log.lines.filter { $0.contains("could not write") }.count == 1, "logged once per run of failures: \(log.lines)")
            // Delivered from disk and memory alike; the two files cannot be deleted, and are forgotten all the same.
            await app.flush()
            #expect(app.statistics.queued == 0)
            #expect(app.statistics.delivered == 5)
            for i in 6...7 { app.track("step_\(i)") }
            #expect(app.statistics.inMemory == 2)
            try readOnly.set(false)
            app.track("step_8")  // the write works again: the two in memory are written too
            #expect(app.statistics.inMemory == 0)
            let onDisk = try FileManager.default.contentsOfDirectory(atPath: queue.path).filter { $0.hasSuffix(".json") }
            #expect(onDisk.count == 2 + 3, "the two undeletable files and the three queued now")
            // The app is killed now; a relaunch finds five files: three new, two already delivered.
            let relaunched = try ClientParityTests.client(server, key, storage: storage) { $0.trackApplicationLifecycleEvents = false }
            await relaunched.flush()
            #expect(relaunched.statistics.queued == 0)
            #expect(try await Self.count(db, "SELECT count(*) FROM events") == 8)
            #expect(try await Self.count(db, "SELECT count(DISTINCT event) FROM events") == 8, "each stored once")
            #expect(try await Self.count(db, "SELECT count(*) FROM events e1 JOIN events e2 ON e2.seq > e1.seq AND e2.event < e1.event") == 0,
                    "stored in the order tracked")
        }
    }

    @Test("a batch refused for one message is split until that message is alone; only it is dropped")
    func oneRefusedMessageNeverDropsItsBatch() async throws {
        try await ClientDeliveryTests.withDatabaseAndServer { db, server, key in
            try await withRelay(to: server, { body, _ in body.contains("poison") ? .refuse(400) : .forward }) { relay in
                let storage = ClientParityTests.storage()
                defer { try? FileManager.default.removeItem(at: storage) }
                let log = LogLines()
                let app = try ClientParityTests.client(relay, key, storage: storage) {
                    $0.trackApplicationLifecycleEvents = false
                    $0.log = { log.append($0) }
                }
                for i in 1...9 { app.track(i == 6 ? "poison" : "step_\(i)") }
                await app.flush()
                #expect(app.statistics.queued == 0)
                #expect(app.statistics.delivered == 8)
                #expect(app.statistics.rejected == 1)
                #expect(log.lines.contains { $0.contains("dropping it") }, "\(log.lines)")
                #expect(try await Self.count(db, "SELECT count(*) FROM events WHERE event LIKE 'step_%'") == 8)
            }
        }
    }

    @Test("an answer lost after the server committed: the batch is sent again with the same messageIds and stored once")
    func lostAnswerIsADuplicate() async throws {
        try await ClientDeliveryTests.withDatabaseAndServer { db, server, key in
            // The first two batches reach the server and commit; the proxy then loses the answer (502, as nginx says).
            try await withRelay(to: server, { _, attempt in attempt <= 2 ? .forwardThenFail(502) : .forward }) { relay in
                let storage = ClientParityTests.storage()
                defer { try? FileManager.default.removeItem(at: storage) }
                let app = try ClientParityTests.client(relay, key, storage: storage) {
                    $0.trackApplicationLifecycleEvents = false
                    $0.retryBaseDelay = .milliseconds(10)
                }
                for i in 1...30 { app.track("step_\(i)") }
                await app.flush()
                #expect(app.statistics.queued == 0)
                #expect(app.statistics.delivered == 30)
                // The two lost answers; on a loaded machine a slow answer can time out once more.
                #expect(app.statistics.failedAttempts >= 2)
                #expect(try await Self.count(db, "SELECT count(*) FROM events") == 30)
                #expect(try await Self.count(db, "SELECT count(DISTINCT message_id) FROM events") == 30)
            }
        }
    }
}

/// Turns a directory read-only for real: as root (whom permissions do not
/// stop) a small tmpfs mounted on it and remounted read-only; otherwise its mode.
final class ReadOnlySwitch: Sendable {
    let directory: URL
    let mounted: Bool

    init(_ directory: URL) throws {
        self.directory = directory
        mounted = geteuid() == 0
        if mounted { try Self.mount(["-t", "tmpfs", "-o", "size=4m", "tmpfs", directory.path]) }
    }

    func set(_ readOnly: Bool) throws {
        if mounted {
            try Self.mount(["-o", "remount,\(readOnly ? "ro" : "rw")", directory.path])
        } else {
            try FileManager.default.setAttributes([.posixPermissions: readOnly ? 0o555 : 0o755], ofItemAtPath: directory.path)
        }
    }

    func release() {
        if mounted { try? Self.run("/bin/umount", [directory.path]) } else { try? set(false) }
    }

    static func mount(_ arguments: [String]) throws { try run("/bin/mount", arguments) }

    static func run(_ tool: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "\(tool) \(arguments.joined(separator: " ")) failed")
    }
}

enum RelayAction: Sendable {
    case forward
    /// Forward, let the server commit, then answer this status instead of the server's answer.
    case forwardThenFail(Int)
    /// Answer this status without forwarding.
    case refuse(Int)
}

/// A proxy in front of the server deciding, per request body and attempt number, what the client sees.
func withRelay(
    to server: URL, _ decide: @escaping @Sendable (String, Int) -> RelayAction, _ body: @Sendable (URL) async throws -> Void
) async throws {
    let attempts = NIOLockedValueBox(0)
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    let router = Router()
    router.post("/v1/batch") { request, _ -> Response in
        let buffer = try await request.body.collect(upTo: 4 << 20)
        let text = String(buffer: buffer)
        let attempt = attempts.withLockedValue { $0 += 1; return $0 }
        let action = decide(text, attempt)
        if case .refuse(let status) = action {
            return Response(status: .init(code: status), body: .init(byteBuffer: ByteBuffer(string: #"{"error":{"code":"refused","message":"refused"}}"#)))
        }
        var forwarded = HTTPClientRequest(url: server.absoluteString + "/v1/batch")
        forwarded.method = .POST
        for field in request.headers where field.name.canonicalName != "host" && field.name.canonicalName != "content-length" {
            forwarded.headers.add(name: field.name.rawName, value: field.value)
        }
        forwarded.body = .bytes(buffer)
        let answer = try await client.execute(forwarded, timeout: .seconds(30))
        let answerBody = try await answer.body.collect(upTo: 4 << 20)
        if case .forwardThenFail(let status) = action { return Response(status: .init(code: status)) }
        return Response(status: .init(code: Int(answer.status.code)), headers: [.contentType: "application/json"], body: .init(byteBuffer: answerBody))
    }
    let outcome: Result<Void, any Error>
    do {
        try await withLoopbackServer(router) { port in try await body(try #require(URL(string: "http://127.0.0.1:\(port)"))) }
        outcome = .success(())
    } catch {
        outcome = .failure(error)
    }
    try await client.shutdown()
    try outcome.get()
}
