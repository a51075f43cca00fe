/// The one error type of the database layer.
///
/// `description` names only the kind of failure and its SQLSTATE: the
/// server's message can quote a value (`invalid input syntax for type
/// integer: "…"`), and descriptions end up in logs and answers. The message,
/// detail, hint and constraint are in `debugDescription`
/// (`String(reflecting:)`), for whoever runs the command: the CLI prints it.
public struct PostgresError: Error, Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What kind of failure this is; extensible without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The connection could not be opened.
        public static let connectionFailed = Code("connection_failed")
        /// The connection broke during an exchange; the statement's outcome is unknown.
        public static let connectionLost = Code("connection_lost")
        /// The server answered with an error (see `sqlState`).
        public static let server = Code("server")
        /// A value could not be sent (for example a NUL byte in text).
        public static let invalidParameter = Code("invalid_parameter")
        /// A column could not be decoded as the requested Swift type.
        public static let decoding = Code("decoding")
        /// The server's answer was not the kind this call expects.
        public static let unexpectedResult = Code("unexpected_result")
        /// No connection came free within the pool's acquire timeout.
        public static let poolTimeout = Code("pool_timeout")
        /// The pool was closed.
        public static let poolClosed = Code("pool_closed")
    }

    public var code: Code
    /// Five-character SQLSTATE, e.g. `23505` for a unique violation.
    public var sqlState: String?
    public var message: String
    public var detail: String?
    public var hint: String?
    public var constraint: String?

    public init(
        _ code: Code, message: String, sqlState: String? = nil,
        detail: String? = nil, hint: String? = nil, constraint: String? = nil
    ) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
        self.detail = detail
        self.hint = hint
        self.constraint = constraint
    }

    /// True when the server cannot take writes for a while through no fault of
    /// the request: insufficient resources (class 53: disk full, out of memory,
    /// too many connections) or an I/O error. Retrying later can succeed.
    public var isResourceShortage: Bool {
        sqlState?.hasPrefix("53") == true || sqlState == "58030"
    }

    /// True for failures after which the connection cannot be used again.
    public var isConnectionFailure: Bool {
        code == .connectionFailed || code == .connectionLost
            || sqlState?.hasPrefix("08") == true || sqlState == "57P01" || sqlState == "57P02"
            || sqlState == "57P03"
    }

    public var description: String {
        var text = "PostgreSQL \(code)"
        if let sqlState { text += " [\(sqlState)]" }
        return text
    }

    public var debugDescription: String {
        var text = description + ": \(message)"
        if let detail { text += "\nDETAIL: \(detail)" }
        if let hint { text += "\nHINT: \(hint)" }
        if let constraint { text += "\nCONSTRAINT: \(constraint)" }
        return text
    }
}

/// SQLSTATE values the rest of the code reacts to.
public enum SQLState {
    public static let uniqueViolation = "23505"
    public static let insufficientPrivilege = "42501"
    public static let readOnlyTransaction = "25006"
}
