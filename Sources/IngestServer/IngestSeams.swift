import EventLog

/// Where the routes look up a write key's app: `WriteKeyStore` (PostgreSQL,
/// cached) in the server; anything in a test that checks route behaviour
/// without a database.
protocol WriteKeyLookup: Sendable {
    /// The app of a live key; nil for an unknown or revoked one; throws when it cannot be checked.
    func app(forKey key: String) async throws -> String?
}

/// Where the routes hand a request's events and rejected messages: the group
/// committer in the server. Returns, per event, true when stored and false
/// for a duplicate; throws `CommitUnavailable` when it cannot commit soon.
protocol EventSink: Sendable {
    func commit(_ events: [NewEvent], quarantine: [QuarantineEntry]) async throws -> [Bool]
}

extension WriteKeyStore: WriteKeyLookup {}
extension GroupCommitter: EventSink {}
