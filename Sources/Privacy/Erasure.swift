import Foundation
import LibPQ
import NIOConcurrencyHelpers
public import Projection

/// `onramp privacy erase` (docs/privacy.md): one person, or thousands, out
/// of the log and of everything built from it, in one command.
///
/// Holding the nightly job's lock all along: first one transaction takes
/// them out of the log through `onramp_privacy_erase` (the one path the
/// append-only triggers let delete; it suppresses their ids first when asked,
/// and appends wait for it), fixes the identity links it leaves behind and
/// queues the persons for the projection (`privacy_pending`); then the
/// nightly run recomputes them, with no events left, and rewrites every day
/// and report row that counted them. A crash in between leaves them queued
/// for the next run.
public struct Erasure: Sendable {
    public var app: String
    public var userIds: [String]
    public var anonymousIds: [String]
    public var requestedBy: String
    public var suppress: Bool
    /// How long to wait for a nightly run that holds the job's lock.
    public var lockWait: Duration

    public init(
        app: String, userIds: [String], anonymousIds: [String], requestedBy: String, suppress: Bool, lockWait: Duration = .seconds(600)
    ) {
        self.app = app
        self.userIds = userIds
        self.anonymousIds = anonymousIds
        self.requestedBy = requestedBy
        self.suppress = suppress
        self.lockWait = lockWait
    }

    /// What an erasure found and removed.
    public struct Result: Sendable, Codable, Equatable {
        public var requestId: Int64
        /// The user ids and devices (anonymous ids) of the persons erased, from the events.
        public var users: [String]
        public var devices: [String]
        /// Devices also used by a user not erased: their anonymous-only
        /// events were the erased person's and went, the other user's stayed
        /// (and the device is not suppressed).
        public var sharedDevices: [String]
        /// Table -> rows removed.
        public var removed: [String: Int]
        public var seconds: Double = 0
    }

    /// Erases, then runs `job` (incremental) as the night would; returns what went.
    public func run(_ job: ProjectionJob, databaseURL: String) async throws -> Result {
        let started = ContinuousClock.now
        let found = NIOLockedValueBox<Result?>(nil)
        do {
            // A nightly run in progress holds the lock: nothing is done yet, so wait for it.
            while true {
                do {
                    try await NightlyRun.run(job, mode: .incremental, query: ReportQuery(), databaseURL: databaseURL, first: { c in
                        let result = try self.eraseFromLog(c, tables: ["funnel_persons"] + job.personTables)
                        found.withLockedValue { $0 = result }
                    }) { _ in () }
                    break
                } catch let busy as ProjectionError where busy.code == .busy && ContinuousClock.now - started < lockWait {
                    try await Task.sleep(for: .seconds(1))
                }
            }
        } catch {
            // Once the log's part has committed, what is left is queued for the next run.
            guard let erased = found.withLockedValue({ $0 }) else { throw error }
            throw ErasureError(
                description: """
                    request \(erased.requestId): the persons are erased from the log, but the run that removes them from \
                    the reports failed (\(error)); the next onramp report finishes it
                    """)
        }
        guard var result = found.withLockedValue({ $0 }) else {
            throw ErasureError(description: "the erasure did not run")
        }
        let elapsed = ContinuousClock.now - started
        result.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let removed = try String(decoding: JSONEncoder().encode(result.removed), as: UTF8.self)
        // The run marked the request complete (`ErasedPersons.forget`); what it removed is known here.
        _ = try await ConnectionPool.using(url: databaseURL) { pool in
            try await pool.query("UPDATE privacy_requests SET removed = $2::jsonb WHERE id = $1", [.int(result.requestId), .json(removed)])
        }
        return result
    }

    /// The log's part, in a transaction of its own (`onramp_privacy_erase`:
    /// the rows removed, the links fixed, the persons queued), then what the
    /// persons had in each of `tables` (which have `app` and `person_id`),
    /// counted before the run removes it. Counted after the commit: on Citus a
    /// transaction cannot read shards another role (the function's) wrote in it.
    func eraseFromLog(_ c: Connection, tables: [String]) throws -> Result {
        guard let row = try c.transaction({ c in try c.query(
            """
            SELECT request_id, array_to_json(users)::text, array_to_json(devices)::text, array_to_json(shared_devices)::text, removed::text
            FROM onramp_privacy_erase($1, $2::text[], $3::text[], $4, $5)
            """,
            [.text(app), .textArray(userIds), .textArray(anonymousIds), .text(requestedBy), .bool(suppress)]
        ).first }) else { throw ErasureError(description: "onramp_privacy_erase returned no row") }
        func list(_ index: Int) throws -> [String] {
            try JSONDecoder().decode([String]?.self, from: Data(try row.decode(String.self, at: index).utf8)) ?? []
        }
        var result = Result(
            requestId: try row.decode(Int64.self, at: 0), users: try list(1), devices: try list(2), sharedDevices: try list(3),
            removed: try JSONDecoder().decode([String: Int].self, from: Data(try row.decode(String.self, at: 4).utf8)))
        for table in tables {
            result.removed[table] = try c.query(
                "SELECT count(*) FROM \(table) WHERE app = $1 AND person_id = ANY($2::text[])",
                [.text(app), .textArray(result.users + result.devices)]
            ).scalar(Int.self)
        }
        return result
    }
}

/// An erasure that could not be done, or was done only in part, said for the operator.
public struct ErasureError: Error, CustomStringConvertible {
    public var description: String
}
