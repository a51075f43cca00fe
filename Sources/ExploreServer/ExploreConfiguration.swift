public import Foundation
public import Logging

/// What `onramp explore` serves with: where it reads, who may ask, and how
/// long a query may take.
public struct ExploreConfiguration: Sendable {
    /// A database URL; as `onramp_analyst` (on a replica too) it reads only
    /// the `analytics` schema.
    public var databaseURL: String
    public var host = "127.0.0.1"
    public var port = 8090
    /// Required of every API call (a bearer header, or the cookie a first
    /// visit with `?token=` sets) when set.
    public var token: String?
    /// Queries at once, each on a connection of its own.
    public var connections = 4
    public var cacheRoot: URL
    public var timeoutSeconds: Double = 300
    /// Attribute paths every store keeps (the configured funnels').
    public var keepingPaths: Set<String> = []
    /// Per app, the zone its cohort days are cut in (the configuration's);
    /// `defaultTimeZone` for any other app.
    public var timeZones: [String: String] = [:]
    public var defaultTimeZone = "UTC"
    public var logger = Logger(label: "onramp.explore")
    /// Called with the bound port once the server listens (tests bind port 0).
    public var onServerRunning: (@Sendable (Int) async -> Void)?

    public init(databaseURL: String, cacheRoot: URL) {
        self.databaseURL = databaseURL
        self.cacheRoot = cacheRoot
    }

    /// Whether `host` accepts connections from this machine only.
    public static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// A token the cookie can carry as it is, and long enough not to be guessed.
    public static func isAcceptableToken(_ token: String) -> Bool {
        token.count >= 16 && token.utf8.allSatisfy { byte in
            (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte) || byte == 45 || byte == 95 || byte == 46
        }
    }
}
