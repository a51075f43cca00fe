internal import CLibPQ
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOConcurrencyHelpers

/// Sole owner of a `PGconn`: `PQfinish` runs exactly once, when the owner goes,
/// including after a failed connect. Touched only under its `Connection`'s
/// lock (`withHandle`), which is what makes sharing it sound.
final class ConnectionHandle: @unchecked Sendable {
    let raw: OpaquePointer
    init(raw: OpaquePointer) { self.raw = raw }
    deinit { PQfinish(raw) }
}

/// Stops the statement a connection is running, from another thread:
/// libpq's cancel object, taken once, is safe to use beside the connection.
public final class StatementCanceller: @unchecked Sendable {
    private let raw: OpaquePointer
    private let lock = NIOLock()

    init(raw: OpaquePointer) { self.raw = raw }
    deinit { PQfreeCancel(raw) }

    /// Asks the server to stop the running statement, if there is one; it fails with SQLSTATE 57014.
    public func cancel() {
        lock.withLock {
            var buffer = [CChar](repeating: 0, count: 256)
            _ = PQcancel(raw, &buffer, Int32(buffer.count))
        }
    }
}

/// Sole owner of a `PGresult`: `PQclear` runs exactly once.
struct ResultHandle: ~Copyable {
    let raw: OpaquePointer
    deinit { PQclear(raw) }
}

/// One PostgreSQL connection.
///
/// Every method is a *blocking* libpq exchange. Call them only from work the
/// `ConnectionPool` runs on its thread pool (`pool.withConnection { … }`), never
/// from an event loop or directly from async code. The handle sits behind a
/// lock (a pthread lock, which ThreadSanitizer sees), so one thread at a time
/// talks to a connection.
public final class Connection: Sendable {
    private let lock = NIOLock()
    private let handle: ConnectionHandle
    /// What it was opened with, for `sibling()`.
    private let conninfo: String
    static let logger = Logger(label: "onramp.postgres")

    /// Runs `body` with the handle, holding the connection's lock.
    private func withHandle<T, E: Error>(_ body: (ConnectionHandle) throws(E) -> T) throws(E) -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(handle)
    }

    private init(handle: ConnectionHandle, conninfo: String) {
        self.handle = handle
        self.conninfo = conninfo
    }

    /// Opens a connection from a URL (`postgresql://…`) or a conninfo string, and
    /// pins the session settings the decoders rely on (UTC, ISO dates, UTF-8).
    public static func connect(_ conninfo: String) throws(PostgresError) -> Connection {
        guard let raw = PQconnectdb(conninfo) else {
            throw PostgresError(.connectionFailed, message: "libpq could not allocate a connection")
        }
        let owner = ConnectionHandle(raw: raw)
        guard PQstatus(raw) == CONNECTION_OK else {
            throw PostgresError(.connectionFailed, message: lastError(raw))
        }
        PQsetNoticeProcessor(raw, { _, message in
            guard let message else { return }
            Connection.logger.info("postgres notice", metadata: ["notice": "\(String(cString: message).trimmingWhitespace())"])
        }, nil)
        let connection = Connection(handle: owner, conninfo: conninfo)
        try connection.executeScript("SET TIME ZONE 'UTC'; SET DateStyle = 'ISO, MDY'; SET client_encoding = 'UTF8'")
        return connection
    }

    /// A new connection to the same server and database as this one, for
    /// work that runs beside this connection's (one session runs one
    /// statement at a time).
    public func sibling() throws(PostgresError) -> Connection {
        try Connection.connect(conninfo)
    }

    // MARK: Statements

    /// Runs one statement with bound parameters and returns its rows.
    @discardableResult
    public func query(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresError) -> QueryResult {
        try withHandle { (h: ConnectionHandle) throws(PostgresError) -> QueryResult in
            let owner = try Connection.execute(h.raw, sql, parameters, binary: false)
            return try Connection.materialize(owner, connection: h.raw)
        }
    }

    /// Runs a statement, handing each row to `body` as it arrives (libpq
    /// single-row mode), so a scan of millions of rows never holds them all.
    /// `body` must not use this connection. If it throws, the query is
    /// cancelled and the error rethrown.
    public func forEachRow(
        _ sql: String, _ parameters: [PostgresValue] = [], _ body: (Row) throws -> Void
    ) throws {
        var columns: [Column]?
        try streamRows(sql, parameters, binary: false) { result in
            let cols = columns ?? Connection.columns(of: result)
            columns = cols
            try body(Row(columns: cols, values: Connection.values(of: result, row: 0, width: cols.count)))
        }
    }

    /// Runs a statement with bound parameters (one that returns rows) and
    /// hands each row of its result to `body` in binary format
    /// (`BinaryRow`). The whole result is held at once: for results a run
    /// reads whole, where `forEachRow`'s single-row mode costs a result and
    /// a string per value for each row. With `streaming`, rows come one at
    /// a time as in `forEachRow`, for a statement whose rows are too many to hold.
    public func forEachBinaryRow(
        _ sql: String, _ parameters: [PostgresValue] = [], streaming: Bool = false, _ body: (BinaryRow) throws -> Void
    ) throws {
        guard !streaming else {
            try streamRows(sql, parameters, binary: true) { result in
                try body(BinaryRow(result: result, row: 0, count: Int(PQnfields(result))))
            }
            return
        }
        try withHandle { (h: ConnectionHandle) throws -> Void in
            let owner = try Connection.execute(h.raw, sql, parameters, binary: true)
            try Connection.check(owner.raw, connection: h.raw, accepting: [PGRES_TUPLES_OK])
            let width = Int(PQnfields(owner.raw))
            for index in 0..<PQntuples(owner.raw) {
                try body(BinaryRow(result: owner.raw, row: index, count: width))
            }
        }
    }

    /// Sends a statement in single-row mode, results `binary` or text, and
    /// hands `body` each one-row result; if `body` throws, the query is
    /// cancelled, the rest drained and the error rethrown.
    private func streamRows(
        _ sql: String, _ parameters: [PostgresValue], binary: Bool, _ body: (OpaquePointer) throws -> Void
    ) throws {
        try withHandle { (h: ConnectionHandle) throws -> Void in
            let raw = h.raw
            let sent = try Parameters.with(parameters) { (count, types, values, lengths, formats) in
                PQsendQueryParams(raw, sql, count, types, values, lengths, formats, binary ? 1 : 0)
            }
            guard sent == 1 else { throw Connection.connectionError(raw) }
            PQsetSingleRowMode(raw)
            var failure: (any Error)?
            while let next = PQgetResult(raw) {
                let owner = ResultHandle(raw: next)
                if failure != nil { continue }  // draining after an error
                let status = PQresultStatus(owner.raw)
                if status == PGRES_SINGLE_TUPLE {
                    do {
                        try body(owner.raw)
                    } catch {
                        failure = error
                        Connection.cancel(raw)
                    }
                } else if status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK {
                    failure = Connection.error(from: owner.raw, connection: raw)
                }
            }
            if let failure { throw failure }
        }
    }

    /// Runs trusted SQL text with several statements (migration files, session
    /// settings). Never pass it anything built from input: it takes no parameters.
    public func executeScript(_ sql: String) throws(PostgresError) {
        try withHandle { (h: ConnectionHandle) throws(PostgresError) -> Void in
            let raw = h.raw
            guard let result = PQexec(raw, sql) else { throw Connection.connectionError(raw) }
            let owner = ResultHandle(raw: result)
            _ = try Connection.materialize(owner, connection: raw)
            // PQexec returns only the last result; earlier ones succeeded or it would have stopped.
        }
    }

    /// A transaction's isolation level, as PostgreSQL names it.
    public enum Isolation: String, Sendable {
        case readCommitted = "READ COMMITTED"
        case repeatableRead = "REPEATABLE READ"
        case serializable = "SERIALIZABLE"
    }

    /// Runs `body` inside BEGIN … COMMIT; rolls back and rethrows if it throws.
    public func transaction<T>(
        isolation: Isolation = .readCommitted, _ body: (Connection) throws -> T
    ) throws -> T {
        try executeScript("BEGIN ISOLATION LEVEL \(isolation.rawValue)")
        do {
            let value = try body(self)
            try executeScript("COMMIT")
            return value
        } catch {
            if !isBroken { try? executeScript("ROLLBACK") }
            throw error
        }
    }

    // MARK: State

    /// The server process serving this connection.
    public var backendPID: Int32 { withHandle { PQbackendPID($0.raw) } }

    /// True once libpq has seen the connection break.
    public var isBroken: Bool { withHandle { PQstatus($0.raw) != CONNECTION_OK } }

    /// True when the connection is inside a transaction block (open or failed).
    public var isInTransaction: Bool {
        withHandle {
            let status = PQtransactionStatus($0.raw)
            return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE
        }
    }

    /// A non-blocking liveness check for an idle connection. An idle backend
    /// sends nothing unless it is going away (a termination notice, then EOF),
    /// so any readable data or hang-up on the socket means the connection is
    /// dead or dying, and is not worth lending out.
    public func isAliveWhenIdle() -> Bool {
        withHandle { h in
            guard PQstatus(h.raw) == CONNECTION_OK else { return false }
            var probe = pollfd(fd: PQsocket(h.raw), events: Int16(POLLIN), revents: 0)
            let ready = poll(&probe, 1, 0)
            return ready == 0
        }
    }

    /// A password as the server stores it, SCRAM-SHA-256, worked out here
    /// by libpq, so the clear text never reaches the server, its logs or
    /// `pg_stat_activity`.
    public func encryptedPassword(_ password: String, user: String) throws(PostgresError) -> String {
        try withHandle { (h: ConnectionHandle) throws(PostgresError) -> String in
            guard let encrypted = PQencryptPasswordConn(h.raw, password, user, "scram-sha-256") else {
                throw PostgresError(.unexpectedResult, message: "libpq could not encrypt the password: \(Connection.lastError(h.raw))")
            }
            defer { PQfreemem(encrypted) }
            return String(cString: encrypted)
        }
    }

    // MARK: COPY

    /// `COPY … FROM STDIN` in text format. `body` writes rows through the writer;
    /// if it throws, the COPY is aborted (`PQputCopyEnd` with the message) and the
    /// caller's error is rethrown. Returns the number of rows the server stored.
    @discardableResult
    public func copyIn(_ sql: String, _ body: (inout CopyWriter) throws -> Void) throws -> Int {
        try withHandle { (h: ConnectionHandle) throws -> Int in
            let raw = h.raw
            guard let started = PQexec(raw, sql) else { throw Connection.connectionError(raw) }
            do {
                let owner = ResultHandle(raw: started)
                guard PQresultStatus(owner.raw) == PGRES_COPY_IN else {
                    _ = try Connection.materialize(owner, connection: raw)
                    throw PostgresError(.unexpectedResult, message: "statement did not start COPY FROM STDIN")
                }
            }
            var writer = CopyWriter(connection: raw)
            do {
                try body(&writer)
                try writer.flush()
            } catch {
                _ = PQputCopyEnd(raw, "client aborted COPY: \(error)")
                Connection.drain(raw)
                throw error
            }
            guard PQputCopyEnd(raw, nil) == 1 else {
                Connection.drain(raw)
                throw Connection.connectionError(raw)
            }
            var outcome: Result<Int, PostgresError> = .success(0)
            while let next = PQgetResult(raw) {
                let owner = ResultHandle(raw: next)
                if case .failure = outcome { continue }
                do throws(PostgresError) {
                    outcome = .success(try Connection.materialize(owner, connection: raw).affectedRows)
                } catch {
                    outcome = .failure(error)
                }
            }
            return try outcome.get()
        }
    }

    /// `COPY (…) TO STDOUT`: hands each chunk libpq returns to `body`, without
    /// holding the whole output. Returns the byte count.
    @discardableResult
    public func copyOut(_ sql: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Int {
        try copyOutCounting(sql, body).bytes
    }

    /// `copyOut`, also returning the rows the server says it copied (its command tag).
    public func copyOutCounting(_ sql: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> (bytes: Int, rows: Int) {
        try withHandle { (h: ConnectionHandle) throws -> (bytes: Int, rows: Int) in
            let raw = h.raw
            guard let started = PQexec(raw, sql) else { throw Connection.connectionError(raw) }
            do {
                let owner = ResultHandle(raw: started)
                guard PQresultStatus(owner.raw) == PGRES_COPY_OUT else {
                    _ = try Connection.materialize(owner, connection: raw)
                    throw PostgresError(.unexpectedResult, message: "statement did not start COPY TO STDOUT")
                }
            }
            var total = 0
            var failure: (any Error)?
            while true {
                var buffer: UnsafeMutablePointer<CChar>?
                let length = PQgetCopyData(raw, &buffer, 0)
                if length > 0, let buffer {
                    defer { PQfreemem(buffer) }
                    total += Int(length)
                    if failure == nil {
                        do { try body(UnsafeRawBufferPointer(start: buffer, count: Int(length))) } catch {
                            failure = error
                            Connection.cancel(raw)
                        }
                    }
                } else {
                    break
                }
            }
            var serverError: PostgresError?
            var rows = 0
            while let next = PQgetResult(raw) {
                let owner = ResultHandle(raw: next)
                if serverError == nil, failure == nil {
                    do throws(PostgresError) { rows = try Connection.materialize(owner, connection: raw).affectedRows } catch { serverError = error }
                }
            }
            if let failure { throw failure }
            if let serverError { throw serverError }
            return (total, rows)
        }
    }

    // MARK: libpq plumbing

    static func lastError(_ raw: OpaquePointer) -> String {
        guard let message = PQerrorMessage(raw) else { return "unknown libpq error" }
        let text = String(cString: message).trimmingWhitespace()
        return text.isEmpty ? "unknown libpq error" : text
    }

    static func connectionError(_ raw: OpaquePointer) -> PostgresError {
        PostgresError(PQstatus(raw) == CONNECTION_OK ? .server : .connectionLost, message: lastError(raw))
    }

    static func error(from result: OpaquePointer, connection raw: OpaquePointer) -> PostgresError {
        func field(_ code: UInt8) -> String? {
            guard let value = PQresultErrorField(result, Int32(code)) else { return nil }
            return String(cString: value)
        }
        let primary = field(UInt8(ascii: "M")) ?? String(cString: PQresultErrorMessage(result)).trimmingWhitespace()
        let lost = PQstatus(raw) != CONNECTION_OK
        return PostgresError(
            lost ? .connectionLost : .server,
            message: primary.isEmpty ? lastError(raw) : primary,
            sqlState: field(UInt8(ascii: "C")),
            detail: field(UInt8(ascii: "D")),
            hint: field(UInt8(ascii: "H")),
            constraint: field(UInt8(ascii: "n"))
        )
    }

    /// Runs a statement with bound parameters, its result in binary format
    /// or text; a result is owned by the handle returned, whatever its status.
    private static func execute(
        _ raw: OpaquePointer, _ sql: String, _ parameters: [PostgresValue], binary: Bool
    ) throws(PostgresError) -> ResultHandle {
        let result = try Parameters.with(parameters) { (count, types, values, lengths, formats) in
            PQexecParams(raw, sql, count, types, values, lengths, formats, binary ? 1 : 0)
        }
        guard let result else { throw connectionError(raw) }
        return ResultHandle(raw: result)
    }

    static func materialize(_ owner: borrowing ResultHandle, connection raw: OpaquePointer) throws(PostgresError) -> QueryResult {
        let result = owner.raw
        try check(result, connection: raw, accepting: [PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_SINGLE_TUPLE, PGRES_EMPTY_QUERY])
        let cols = columns(of: result)
        let count = Int(PQntuples(result))
        var rows: [Row] = []
        rows.reserveCapacity(count)
        for r in 0..<count {
            rows.append(Row(columns: cols, values: values(of: result, row: r, width: cols.count)))
        }
        let tag = PQcmdTuples(result).map { String(cString: $0) } ?? ""
        return QueryResult(columns: cols, rows: rows, affectedRows: Int(tag) ?? 0)
    }

    /// Throws the server's error for a failed statement's result, or an
    /// unexpected-result error for any status but those `accepting`.
    static func check(_ result: OpaquePointer, connection raw: OpaquePointer, accepting: [ExecStatusType]) throws(PostgresError) {
        let status = PQresultStatus(result)
        guard !accepting.contains(status) else { return }
        if status == PGRES_FATAL_ERROR || status == PGRES_NONFATAL_ERROR || status == PGRES_BAD_RESPONSE {
            throw error(from: result, connection: raw)
        }
        throw PostgresError(.unexpectedResult, message: "unexpected result status \(String(cString: PQresStatus(status)))")
    }

    static func columns(of result: OpaquePointer) -> [Column] {
        (0..<PQnfields(result)).map { i in
            Column(name: String(cString: PQfname(result, i)), typeOID: PQftype(result, i))
        }
    }

    static func values(of result: OpaquePointer, row: Int, width: Int) -> [String?] {
        let r = Int32(row)
        return (0..<Int32(width)).map { c -> String? in
            if PQgetisnull(result, r, c) == 1 { return nil }
            guard let value = PQgetvalue(result, r, c) else { return nil }
            let length = Int(PQgetlength(result, r, c))
            return value.withMemoryRebound(to: UInt8.self, capacity: length) {
                String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
            }
        }
    }

    /// A canceller for this connection's statements, usable from any thread
    /// while another runs one (a page's Cancel button); nil when libpq cannot
    /// make one.
    public func canceller() -> StatementCanceller? {
        withHandle { handle in PQgetCancel(handle.raw).map(StatementCanceller.init(raw:)) }
    }

    /// Asks the server to stop the running statement; the caller still drains results.
    static func cancel(_ raw: OpaquePointer) {
        guard let cancel = PQgetCancel(raw) else { return }
        defer { PQfreeCancel(cancel) }
        var buffer = [CChar](repeating: 0, count: 256)
        _ = PQcancel(cancel, &buffer, Int32(buffer.count))
    }

    static func drain(_ raw: OpaquePointer) {
        while let next = PQgetResult(raw) {
            let owner = ResultHandle(raw: next)
            _ = owner
        }
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        return String(scalars)
    }
}
