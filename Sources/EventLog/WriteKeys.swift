public import Foundation
public import LibPQ
import Crypto
import NIOConcurrencyHelpers

/// One row of `write_keys`, without the hash.
public struct WriteKeyInfo: Sendable, Hashable {
    public var id: Int64
    public var app: String
    public var prefix: String
    public var createdAt: Date
    public var revokedAt: Date?
    /// Web origins allowed to post with the key; empty: server-only.
    public var allowedOrigins: [String]
}

/// What a live key grants: the app its events go to, and the web origins a
/// browser may send them from.
public struct WriteKeyGrant: Sendable, Hashable {
    public var app: String
    public var allowedOrigins: Set<String>

    public init(app: String, allowedOrigins: Set<String> = []) {
        self.app = app
        self.allowedOrigins = allowedOrigins
    }

    /// Whether a request carrying `Origin: origin` may use the key (compared
    /// as browsers serialize origins, so `HTTPS://Example.com:443` matches).
    public func allows(origin: String) -> Bool {
        guard let normalized = try? WebOrigin.normalize(origin) else { return false }
        return allowedOrigins.contains(normalized)
    }
}

/// Write keys: created at random, stored only as SHA-256, looked up by hash.
///
/// Lookups read an in-memory snapshot of every live key (hash → grant), loaded
/// with one query and reloaded once it is `cacheTTL` old, so a revoke or an
/// origin change takes effect within `cacheTTL`. A key the snapshot lacks
/// reloads it, at most once a `missReloadInterval` (waiting for that if need
/// be), so a key created a moment ago works within a second, and a flood of
/// made-up keys costs at most one query a second however many there are.
/// One reload runs at a time; the others wait for it.
public final class WriteKeyStore: Sendable {
    // A pthread lock: ThreadSanitizer cannot see Synchronization.Mutex on Linux and reports false races.
    private let pool: ConnectionPool
    private let cacheTTL: Duration
    private let missReloadInterval: Duration
    private let snapshot = NIOLockedValueBox<Snapshot?>(nil)
    private let reloading = NIOLockedValueBox<Task<Snapshot, any Error>?>(nil)

    private struct Snapshot: Sendable {
        var grants: [Data: WriteKeyGrant]
        /// Every origin some live key allows.
        var origins: Set<String>
        var loadedAt: ContinuousClock.Instant
    }

    public init(pool: ConnectionPool, cacheTTL: Duration = .seconds(5), missReloadInterval: Duration = .seconds(1)) {
        self.pool = pool
        self.cacheTTL = cacheTTL
        self.missReloadInterval = min(missReloadInterval, cacheTTL)
    }

    /// The part of a key that is stored in the clear, listed and logged: `ork_` and 8 hex digits.
    public static func prefix(of key: String) -> String { String(key.prefix(12)) }

    /// SHA-256 of the key's UTF-8 bytes.
    public static func hash(_ key: String) -> Data { Data(SHA256.hash(data: Data(key.utf8))) }

    /// A new key for `app`: `ork_` and 32 random bytes in hex. Only its hash is
    /// stored. `allowedOrigins` must already be normalized (`WebOrigin.normalize`).
    public func create(app: String, allowedOrigins: [String] = []) async throws -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let key = "ork_" + bytes.map { String(format: "%02x", $0) }.joined()
        let hash = [UInt8](Self.hash(key))
        let prefix = Self.prefix(of: key)
        try await pool.query(
            "INSERT INTO write_keys (app, key_hash, key_prefix, allowed_origins) VALUES ($1, $2, $3, $4)",
            [.text(app), .bytes(hash), .text(prefix), .textArray(allowedOrigins)])
        return key
    }

    /// What a live key grants; nil for an unknown or revoked key.
    public func grant(forKey key: String) async throws -> WriteKeyGrant? {
        let hash = Self.hash(key)
        let current = try await fresh()
        if let grant = current.grants[hash] { return grant }
        // Not there: perhaps created since. Reload, but not more often than missReloadInterval.
        let age = ContinuousClock.now - current.loadedAt
        if age < missReloadInterval { try await Task.sleep(for: missReloadInterval - age) }
        return try await reload(after: current.loadedAt).grants[hash]
    }

    /// Whether some live key allows `origin`: a CORS preflight carries no key,
    /// so it is answered for an origin any key allows; the request that follows
    /// is checked against its own key.
    public func anyKeyAllows(origin: String) async throws -> Bool {
        guard let normalized = try? WebOrigin.normalize(origin) else { return false }
        return try await fresh().origins.contains(normalized)
    }

    /// The snapshot, reloaded first when it is `cacheTTL` old.
    private func fresh() async throws -> Snapshot {
        let now = ContinuousClock.now
        if let current = snapshot.withLockedValue({ $0 }), now - current.loadedAt < cacheTTL { return current }
        return try await reload(after: snapshot.withLockedValue { $0?.loadedAt })
    }

    /// A snapshot loaded after `after`: the one another caller's reload made since, or a new one.
    private func reload(after: ContinuousClock.Instant?) async throws -> Snapshot {
        let task = reloading.withLockedValue { running -> Task<Snapshot, any Error>? in
            if let running { return running }
            if let current = snapshot.withLockedValue({ $0 }), let after, current.loadedAt > after { return nil }
            let started = Task { try await self.load() }
            running = started
            return started
        }
        guard let task else { return try await fresh() }
        do {
            let loaded = try await task.value
            snapshot.withLockedValue { current in
                if let current, current.loadedAt >= loaded.loadedAt { return }
                current = loaded
            }
            reloading.withLockedValue { if $0 == task { $0 = nil } }
            return loaded
        } catch {
            reloading.withLockedValue { if $0 == task { $0 = nil } }
            throw error
        }
    }

    private func load() async throws -> Snapshot {
        let rows = try await pool.withConnection { connection in
            try connection.query(
                "SELECT key_hash, app, to_json(allowed_origins)::text FROM write_keys WHERE revoked_at IS NULL"
            ).rows.map { row in
                (Data(try row.decode(PostgresBytes.self, at: 0).bytes), try row.decode(String.self, at: 1), try Self.origins(row.decode(String.self, at: 2)))
            }
        }
        var grants: [Data: WriteKeyGrant] = [:]
        var origins = Set<String>()
        for (hash, app, allowed) in rows {
            grants[hash] = WriteKeyGrant(app: app, allowedOrigins: Set(allowed))
            origins.formUnion(allowed)
        }
        return Snapshot(grants: grants, origins: origins, loadedAt: .now)
    }

    public func list() async throws -> [WriteKeyInfo] {
        try await pool.withConnection { connection in
            try connection.query(
                "SELECT id, app, key_prefix, created_at, revoked_at, to_json(allowed_origins)::text FROM write_keys ORDER BY id"
            ).rows.map {
                WriteKeyInfo(
                    id: try $0.decode(Int64.self, at: 0), app: try $0.decode(String.self, at: 1),
                    prefix: try $0.decode(String.self, at: 2), createdAt: try $0.decode(Date.self, at: 3),
                    revokedAt: try $0.decode(Date?.self, at: 4), allowedOrigins: try Self.origins($0.decode(String.self, at: 5)))
            }
        }
    }

    /// Adds (or with `allowed` false, removes) `origin` for the live keys matching
    /// `key` (as `revoke` matches). Returns how many keys matched.
    @discardableResult
    public func setOrigin(_ origin: String, allowed: Bool, forKey key: String) async throws -> Int {
        let update = allowed
            ? "UPDATE write_keys SET allowed_origins = CASE WHEN $1 = ANY(allowed_origins) THEN allowed_origins ELSE allowed_origins || $1 END"
            : "UPDATE write_keys SET allowed_origins = array_remove(allowed_origins, $1)"
        let (condition, value) = Self.matching(key)
        let result = try await pool.query(update + " WHERE " + condition + " AND revoked_at IS NULL", [.text(origin), value])
        forgetCached()
        return result.affectedRows
    }

    /// Revokes keys matching `key` (the full key, its prefix as `keys list` shows it, or the row id).
    /// Returns how many keys were revoked.
    @discardableResult
    public func revoke(_ key: String) async throws -> Int {
        let (condition, value) = Self.matching(key, parameter: 1)
        let result = try await pool.query("UPDATE write_keys SET revoked_at = now() WHERE " + condition + " AND revoked_at IS NULL", [value])
        forgetCached()
        return result.affectedRows
    }

    /// The condition selecting keys by full key, prefix or row id, on parameter `$parameter`.
    private static func matching(_ key: String, parameter: Int = 2) -> (String, PostgresValue) {
        if let id = Int64(key) { return ("id = $\(parameter)", .int(id)) }
        if key.count > 12 { return ("key_hash = $\(parameter)", .bytes([UInt8](hash(key)))) }
        return ("key_prefix = $\(parameter)", .text(key))
    }

    /// The origins column, read as JSON (`to_json(allowed_origins)`).
    private static func origins(_ json: String) throws -> [String] {
        try JSONDecoder().decode([String].self, from: Data(json.utf8))
    }

    private func forgetCached() {
        snapshot.withLockedValue { $0 = nil }
    }
}
