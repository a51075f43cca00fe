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
/// Lookups are cached for a few seconds (positive and negative), so a hot
/// client costs no query per request, and a revoke takes effect within `cacheTTL`.
public final class WriteKeyStore: Sendable {
    // A pthread lock: ThreadSanitizer cannot see Synchronization.Mutex on Linux and reports false races.
    private let pool: ConnectionPool
    private let cacheTTL: Duration
    private let cache = NIOLockedValueBox<[Data: (grant: WriteKeyGrant?, until: ContinuousClock.Instant)]>([:])
    private let anyKeyOrigins = NIOLockedValueBox<(origins: Set<String>, until: ContinuousClock.Instant)?>(nil)

    public init(pool: ConnectionPool, cacheTTL: Duration = .seconds(5)) {
        self.pool = pool
        self.cacheTTL = cacheTTL
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
        let now = ContinuousClock.now
        if let hit = cache.withLockedValue({ $0[hash] }), hit.until > now { return hit.grant }
        let bytes = [UInt8](hash)
        let grant = try await pool.withConnection { connection -> WriteKeyGrant? in
            guard let row = try connection.query(
                "SELECT app, to_json(allowed_origins)::text FROM write_keys WHERE key_hash = $1 AND revoked_at IS NULL", [.bytes(bytes)]
            ).first else { return nil }
            return WriteKeyGrant(app: try row.decode(String.self, at: 0), allowedOrigins: Set(try Self.origins(row.decode(String.self, at: 1))))
        }
        let ttl = cacheTTL
        cache.withLockedValue { entries in
            // Bounded: a flood of made-up keys costs one query each at most once per TTL, and never unbounded memory.
            if entries.count > 10_000 { entries.removeAll() }
            entries[hash] = (grant, now + ttl)
        }
        return grant
    }

    /// Whether some live key allows `origin`: a CORS preflight carries no key,
    /// so it is answered for an origin any key allows; the request that follows
    /// is checked against its own key.
    public func anyKeyAllows(origin: String) async throws -> Bool {
        guard let normalized = try? WebOrigin.normalize(origin) else { return false }
        let now = ContinuousClock.now
        if let hit = anyKeyOrigins.withLockedValue({ $0 }), hit.until > now { return hit.origins.contains(normalized) }
        let origins = try await pool.withConnection { connection in
            Set(try connection.query(
                "SELECT DISTINCT unnest(allowed_origins) FROM write_keys WHERE revoked_at IS NULL"
            ).rows.map { try $0.decode(String.self, at: 0) })
        }
        anyKeyOrigins.withLockedValue { $0 = (origins, now + cacheTTL) }
        return origins.contains(normalized)
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
        cache.withLockedValue { $0.removeAll() }
        anyKeyOrigins.withLockedValue { $0 = nil }
    }
}
