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
}

/// Write keys: created at random, stored only as SHA-256, looked up by hash.
///
/// Lookups are cached for a few seconds (positive and negative), so a hot
/// client costs no query per request, and a revoke takes effect within `cacheTTL`.
public final class WriteKeyStore: Sendable {
    // A pthread lock: ThreadSanitizer cannot see Synchronization.Mutex on Linux and reports false races.
    private let pool: ConnectionPool
    private let cacheTTL: Duration
    private let cache = NIOLockedValueBox<[Data: (app: String?, until: ContinuousClock.Instant)]>([:])

    public init(pool: ConnectionPool, cacheTTL: Duration = .seconds(5)) {
        self.pool = pool
        self.cacheTTL = cacheTTL
    }

    /// SHA-256 of the key's UTF-8 bytes.
    public static func hash(_ key: String) -> Data { Data(SHA256.hash(data: Data(key.utf8))) }

    /// A new key for `app`: `ork_` and 32 random bytes in hex. Only its hash is stored.
    public func create(app: String) async throws -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let key = "ork_" + bytes.map { String(format: "%02x", $0) }.joined()
        let hash = [UInt8](Self.hash(key))
        let prefix = String(key.prefix(12))
        try await pool.query(
            "INSERT INTO write_keys (app, key_hash, key_prefix) VALUES ($1, $2, $3)",
            [.text(app), .bytes(hash), .text(prefix)])
        return key
    }

    /// The app a live key belongs to; nil for an unknown or revoked key.
    public func app(forKey key: String) async throws -> String? {
        let hash = Self.hash(key)
        let now = ContinuousClock.now
        if let hit = cache.withLockedValue({ $0[hash] }), hit.until > now { return hit.app }
        let bytes = [UInt8](hash)
        let app = try await pool.withConnection { connection -> String? in
            try connection.query(
                "SELECT app FROM write_keys WHERE key_hash = $1 AND revoked_at IS NULL", [.bytes(bytes)]
            ).first?.decode(String.self, at: 0)
        }
        let ttl = cacheTTL
        cache.withLockedValue { entries in
            if entries.count > 10_000 { entries.removeAll() }
            entries[hash] = (app, now + ttl)
        }
        return app
    }

    public func list() async throws -> [WriteKeyInfo] {
        try await pool.withConnection { connection in
            try connection.query("SELECT id, app, key_prefix, created_at, revoked_at FROM write_keys ORDER BY id").rows.map {
                WriteKeyInfo(
                    id: try $0.decode(Int64.self, at: 0), app: try $0.decode(String.self, at: 1),
                    prefix: try $0.decode(String.self, at: 2), createdAt: try $0.decode(Date.self, at: 3),
                    revokedAt: try $0.decode(Date?.self, at: 4))
            }
        }
    }

    /// Revokes keys matching `key` (the full key, its prefix as `keys list` shows it, or the row id).
    /// Returns how many keys were revoked.
    @discardableResult
    public func revoke(_ key: String) async throws -> Int {
        let result: QueryResult
        if let id = Int64(key) {
            result = try await pool.query("UPDATE write_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL", [.int(id)])
        } else if key.count > 12 {
            result = try await pool.query(
                "UPDATE write_keys SET revoked_at = now() WHERE key_hash = $1 AND revoked_at IS NULL", [.bytes([UInt8](Self.hash(key)))])
        } else {
            result = try await pool.query(
                "UPDATE write_keys SET revoked_at = now() WHERE key_prefix = $1 AND revoked_at IS NULL", [.text(key)])
        }
        cache.withLockedValue { $0.removeAll() }
        return result.affectedRows
    }
}
