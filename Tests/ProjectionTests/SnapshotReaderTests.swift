import Foundation
import LibPQ
import LocalPostgres
import LogReading
import TestSupport
import Testing

@testable import Projection

@Suite("SnapshotReader")
struct SnapshotReaderTests {
    @Test("the second session sees exactly the run's snapshot: not what commits later, nor the run's own writes")
    func readsTheRunsSnapshot() async throws {
        let db = try await TestDatabase.create(migrated: false)
        let pool = db.pool(maxConnections: 2)
        try await pool.query("CREATE TABLE log (n int)")
        try await pool.query("INSERT INTO log VALUES (1)")
        let seen = try await pool.withConnection { c in
            try c.transaction(isolation: .repeatableRead) { c -> [Int] in
                let atStart = try c.query("SELECT count(*) FROM log").scalar(Int.self)
                let reader = try SnapshotReader.open(beside: c)
                #expect(reader !== c && reader.backendPID != c.backendPID)
                let elsewhere = try c.sibling()
                try elsewhere.query("INSERT INTO log VALUES (2)")  // commits after the snapshot
                try c.query("INSERT INTO log VALUES (3)")  // the run's own, uncommitted
                return [
                    atStart, try reader.query("SELECT count(*) FROM log").scalar(Int.self),
                    try elsewhere.query("SELECT count(*) FROM log").scalar(Int.self),
                    try c.query("SELECT count(*) FROM log").scalar(Int.self),
                ]
            }
        }
        #expect(seen == [1, 1, 2, 2])
        #expect(try await pool.query("SELECT count(*) FROM log").scalar(Int.self) == 3)
        await pool.close()
        try await db.drop()
    }
}
