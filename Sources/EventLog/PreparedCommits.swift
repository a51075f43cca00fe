import Foundation
public import LibPQ

/// On Citus an append that touches two workers commits in two phases: each
/// worker prepares, the coordinator commits, then it tells each worker to
/// commit what it prepared. Between the last two steps the coordinator's
/// snapshot counts the transaction as committed while a worker does not yet
/// show its rows. A reader that took its snapshot on the coordinator waits
/// for those before its first read of a worker, or it would miss rows its
/// snapshot says are there (docs/scaling.md, "The job's cursor on Citus").
public enum PreparedCommits {
    /// Waits until every transaction prepared on a worker when this is
    /// called has finished, asking the coordinator to recover any that are
    /// in doubt (their coordinator gone) after `recoverAfter`; throws after
    /// `timeout`, naming them. The workers are asked on connections of their
    /// own, outside `c`'s transaction, whose reads of the workers have not
    /// begun.
    public static func settle(_ c: Connection, recoverAfter: Duration = .seconds(5), timeout: Duration = .seconds(120)) throws {
        let clock = ContinuousClock()
        let started = clock.now
        var waiting = try prepared(c)
        var recovered = false
        while !waiting.isEmpty {
            let elapsed = clock.now - started
            if elapsed > timeout {
                throw PostgresError(
                    .unexpectedResult,
                    message: "\(waiting.count) two-phase commits prepared on the workers are still unresolved after \(timeout): "
                        + waiting.sorted().prefix(5).joined(separator: ", ")
                        + "; a worker or the coordinator may be down (SELECT recover_prepared_transactions() resolves them once it is back)")
            }
            if elapsed > recoverAfter && !recovered {
                _ = try c.query("SELECT recover_prepared_transactions()")
                recovered = true
            }
            Thread.sleep(forTimeInterval: 0.05)
            waiting.formIntersection(try prepared(c))
        }
    }

    /// The transactions prepared on the workers in this database, as
    /// "node:port gid".
    static func prepared(_ c: Connection) throws -> Set<String> {
        let rows = try c.query(
            """
            SELECT w.nodename || ':' || w.nodeport, w.success, w.result
            FROM run_command_on_workers(
                $$SELECT coalesce(string_agg(gid, ' '), '') FROM pg_prepared_xacts WHERE database = current_database()$$) AS w
            """
        ).rows
        var gids: Set<String> = []
        for row in rows {
            let node = try row.decode(String.self, at: 0)
            let result = try row.decode(String.self, at: 2)
            guard try row.decode(Bool.self, at: 1) else {
                throw PostgresError(.unexpectedResult, message: "worker \(node) could not be asked for its prepared transactions: \(result)")
            }
            for gid in result.split(separator: " ") { gids.insert("\(node) \(gid)") }
        }
        return gids
    }
}
