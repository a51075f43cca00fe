import EventLog

/// Where the routes look up a write key's app: `WriteKeyStore` (PostgreSQL,
/// cached) in the server; anything in a test that checks route behaviour
/// without a database.
protocol WriteKeyLookup: Sendable {
    /// What a live key grants; nil for an unknown or revoked one; throws when it cannot be checked.
    func grant(forKey key: String) async throws -> WriteKeyGrant?
    /// Whether some live key allows this web origin (for CORS preflights, which carry no key).
    func anyKeyAllows(origin: String) async throws -> Bool
}

/// Where the routes hand a request's events and rejected messages: the group
/// committer in the server. Returns, per event, what became of it; throws
/// `CommitUnavailable` when it cannot commit soon.
protocol EventSink: Sendable {
    func commit(_ events: [NewEvent], quarantine: [QuarantineEntry]) async throws -> [AppendOutcome]
}

extension WriteKeyStore: WriteKeyLookup {}
extension GroupCommitter: EventSink {}
