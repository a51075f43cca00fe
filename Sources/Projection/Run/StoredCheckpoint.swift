import LibPQ
import LogReading

/// Where the job keeps its position in the log between runs: the one row of
/// `projection_checkpoint`.
extension Checkpoint {
    static func load(_ c: Connection) throws -> Checkpoint {
        let row = try c.query("SELECT horizon_txid, pending_txids FROM projection_checkpoint").scalarRow()
        return try Checkpoint(row: row)
    }

    /// Saves the position, and `clock`, the run's (its `now`).
    func save(_ c: Connection, clock: Int64) throws {
        try c.query(
            "UPDATE projection_checkpoint SET horizon_txid = $1, pending_txids = $2::int8[], updated_at = now(), computed_at = $3",
            [.int(horizon), .intArray(pending), .microseconds(clock)])
    }

    /// The clock of the run that saved the checkpoint; nil before any run did.
    static func clock(_ c: Connection) throws -> Int64? {
        try c.query("SELECT (extract(epoch FROM computed_at) * 1000000)::int8 FROM projection_checkpoint").scalarRow().decode(Int64?.self, at: 0)
    }
}
