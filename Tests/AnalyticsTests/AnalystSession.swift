import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Projection

/// A database with the analyst dataset, folded by the nightly job, and
/// connections as the analyst and the operator.
struct AnalystSession {
    let db: TestDatabase
    let admin: ConnectionPool
    let analyst: ConnectionPool
    let operatorPool: ConnectionPool

    static func make() async throws -> AnalystSession {
        let db = try await TestDatabase.create()
        let admin = db.pool(maxConnections: 1)
        let configuration = try FunnelConfiguration.default()
        try await admin.withConnection { c in
            try AnalystDataset().insert(c)
            _ = try ProjectionJob(configuration: configuration, showProgress: false).run(c, mode: .incremental)
        }
        return AnalystSession(
            db: db, admin: admin, analyst: ConnectionPool(url: try db.url(as: "onramp_analyst"), maxConnections: 1),
            operatorPool: ConnectionPool(url: try db.url(as: "onramp_operator"), maxConnections: 1))
    }

    /// Persons the nightly job counted at each of `funnel`'s first `steps` steps, as text.
    func nightlyReach(_ funnel: String, steps: Int) async throws -> [String] {
        try await analyst.query(
            """
            SELECT sum(persons)::text AS persons FROM analytics.funnel_daily
            WHERE funnel = $1 AND step_index <= $2 GROUP BY step_index ORDER BY step_index
            """, [.text(funnel), .int(Int64(steps))]
        ).table.map { $0["persons"] ?? "" }
    }

    func close() async throws {
        await admin.close()
        await analyst.close()
        await operatorPool.close()
        try await db.drop()
    }

    /// The repository's sql/ directory.
    static var sqlDirectory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("sql")
    }

    static func example(_ name: String) throws -> String {
        try String(contentsOf: sqlDirectory.appendingPathComponent("examples/\(name)"), encoding: .utf8)
    }
}

extension QueryResult {
    /// Rows as `column -> text` dictionaries, for readable expectations.
    var table: [[String: String]] {
        rows.map { row in
            var out: [String: String] = [:]
            for (i, column) in columns.enumerated() { out[column.name] = row.text(at: i) ?? "NULL" }
            return out
        }
    }
}
