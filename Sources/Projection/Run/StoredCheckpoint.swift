import LibPQ
import LogReading

/// Where the job keeps its position in the log between runs: the one row of
/// `projection_checkpoint`.
extension Checkpoint {
    static func load(_ c: Connection) throws -> Checkpoint {
        let row = try c.query("SELECT horizon_txid, pending_txids FROM projection_checkpoint").scalarRow()
        return try Checkpoint(row: row)
    }

    func save(_ c: Connection) throws {
        try c.query(
            "UPDATE projection_checkpoint SET horizon_txid = $1, pending_txids = $2::int8[], updated_at = now()",
            [.int(horizon), .intArray(pending)])
    }
}
