import Foundation
import LibPQ
import LocalPostgres
import NIOConcurrencyHelpers
import NIOPosix
import Testing

@Suite("Connection pool")
struct PoolTests {
    @Test("a unique violation surfaces as SQLSTATE 23505 with its constraint, and the pool stays usable")
    func uniqueViolation() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 2)
        try await pool.query("CREATE TABLE k (id text CONSTRAINT k_pkey PRIMARY KEY)")
        try await pool.query("INSERT INTO k VALUES ($1)", ["a"])
        let error = await #expect(throws: PostgresError.self) { try await pool.query("INSERT INTO k VALUES ($1)", ["a"]) }
        #expect(error?.sqlState == "23505")
        #expect(error?.code == .server)
        #expect(error?.constraint == "k_pkey")
        #expect(error?.description.contains("Key (id)") == false)  // details stay out of the plain description
        #expect(error?.debugDescription.contains("Key (id)=(a) already exists") == true)
        // The same connection inside a failed transaction is rolled back before reuse.
        await #expect(throws: PostgresError.self) {
            try await pool.transaction { c in try c.query("INSERT INTO k VALUES ('b'), ('a')") }
        }
        try await pool.query("INSERT INTO k VALUES ($1)", ["c"])
        #expect(try await pool.query("SELECT count(*) FROM k").scalar(Int.self) == 2)
        await pool.close()
        try await db.drop()
    }

    @Test("a connection whose backend is killed is replaced and the next query succeeds")
    func killedBackendIsReplaced() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        let admin = ConnectionPool(url: db.adminURL, maxConnections: 1)
        let first = try await pool.query("SELECT pg_backend_pid()").scalar(Int.self)
        let killed = try await admin.query("SELECT pg_terminate_backend($1::int, 5000)", [.int(first)]).scalar(Bool.self)
        #expect(killed)
        let second = try await pool.query("SELECT pg_backend_pid()").scalar(Int.self)
        #expect(second != first)
        #expect(pool.usage.open == 1)
        await admin.close()
        await pool.close()
        try await db.drop()
    }

    @Test("a connection that breaks while lent out fails that call with connection_lost and is replaced")
    func brokenWhileLent() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        let error = await #expect(throws: PostgresError.self) {
            try await pool.query("SELECT pg_terminate_backend(pg_backend_pid())")
        }
        #expect(error?.isConnectionFailure == true)
        #expect(try await pool.query("SELECT 42").scalar(Int.self) == 42)
        await pool.close()
        try await db.drop()
    }

    @Test("the pool never opens more than its bound, never runs libpq on an event loop, and times out waiters")
    func bounded() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = ConnectionPool(.init(conninfo: db.url, maxConnections: 3, acquireTimeout: .seconds(30)))
        var pids = Set<Int>()
        var onEventLoop = false
        try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for _ in 0..<40 {
                group.addTask {
                    try await pool.withConnection { c in
                        let loop = MultiThreadedEventLoopGroup.currentEventLoop != nil
                        return (try c.query("SELECT pg_backend_pid() FROM pg_sleep(0.01)").scalar(Int.self), loop)
                    }
                }
            }
            for try await (pid, loop) in group {
                pids.insert(pid)
                onEventLoop = onEventLoop || loop
            }
        }
        #expect(pids.count <= 3)
        #expect(onEventLoop == false)
        #expect(pool.usage.open <= 3)
        await pool.close()

        let tiny = ConnectionPool(.init(conninfo: db.url, maxConnections: 1, acquireTimeout: .milliseconds(200)))
        // The holder says when it has its connection: a fixed head start lost the race on a loaded CI machine.
        let holding = NIOLockedValueBox(false)
        async let holder: Void = tiny.withConnection { c in
            holding.withLockedValue { $0 = true }
            _ = try c.query("SELECT pg_sleep(3)")
        }
        while !holding.withLockedValue({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        let error = await #expect(throws: PostgresError.self) { try await tiny.query("SELECT 1") }
        #expect(error?.code == .poolTimeout)
        try await holder
        #expect(try await tiny.query("SELECT 1").scalar(Int.self) == 1)
        await tiny.close()
        try await db.drop()
    }

    @Test("connecting to nothing fails with connection_failed and a libpq message")
    func connectFailure() async throws {
        let pool = ConnectionPool(url: "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", maxConnections: 1)
        let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
        #expect(error?.code == .connectionFailed)
        #expect(error?.message.isEmpty == false)
        #expect(pool.usage.open == 0)
        await pool.close()
    }

    @Test("a transaction commits on success and rolls back when the body throws")
    func transactions() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 1)
        try await pool.query("CREATE TABLE t (v int)")
        _ = try await pool.transaction { c in try c.query("INSERT INTO t VALUES (1)") }
        struct Oops: Error {}
        await #expect(throws: Oops.self) {
            try await pool.transaction { c in
                try c.query("INSERT INTO t VALUES (2)")
                throw Oops()
            }
        }
        #expect(try await pool.query("SELECT array_agg(v)::text FROM t").scalar(String.self) == "{1}")
        await pool.close()
        try await db.drop()
    }
}
