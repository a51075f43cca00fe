public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTPTypes
import Hummingbird
import NIOCore

/// How the server sees a request that came through proxies: which address the
/// client is at, and which public base URL it used. `X-Forwarded-*` headers are
/// believed only from a peer inside a trusted network (`--trusted-proxy`);
/// anyone else could send them. A configured public URL (`--public-url`) wins.
public struct Forwarding: Sendable {
    public var publicURL: URL?
    public var trustedProxies: [IPNetwork]

    public init(publicURL: URL? = nil, trustedProxies: [IPNetwork] = []) {
        self.publicURL = publicURL
        self.trustedProxies = trustedProxies
    }

    /// The scheme and `host[:port][/path]` clients reach the API at, for the
    /// settings document's `apiHost` (`host/v1`) and `protocol`.
    func publicBase(of request: Request, peer: SocketAddress?) -> (scheme: String, host: String) {
        if let publicURL, let scheme = publicURL.scheme, let host = publicURL.host {
            let port = publicURL.port.map { ":\($0)" } ?? ""
            let path = publicURL.path.hasSuffix("/") ? String(publicURL.path.dropLast()) : publicURL.path
            return (scheme, host + port + path)
        }
        let authority = request.head.authority ?? "127.0.0.1:8080"
        guard trusts(peer) else { return ("http", authority) }
        let host = Self.first(request.headers[.xForwardedHost]) ?? authority
        let scheme = Self.first(request.headers[.xForwardedProto])?.lowercased()
        return (scheme == "https" ? "https" : "http", host)
    }

    /// The client's address: the peer's, or behind trusted proxies the nearest
    /// address in `X-Forwarded-For` that is not itself a trusted proxy.
    func client(of request: Request, peer: SocketAddress?) -> String? {
        guard let peer else { return nil }
        let peerText = peer.ipAddress ?? peer.pathname ?? "\(peer)"
        guard trusts(peer), let chain = request.headers[.xForwardedFor] else { return peerText }
        let hops = chain.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        for hop in hops.reversed() {
            guard let bytes = IPNetwork.bytes(parsing: hop) else { return hop }
            if !trustedProxies.contains(where: { $0.contains(bytes) }) { return hop }
        }
        return hops.first ?? peerText
    }

    private func trusts(_ peer: SocketAddress?) -> Bool {
        guard let peer, let bytes = IPNetwork.bytes(of: peer) else { return false }
        return trustedProxies.contains { $0.contains(bytes) }
    }

    private static func first(_ value: String?) -> String? {
        value?.split(separator: ",").first.map { $0.trimmingCharacters(in: .whitespaces) }.flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// An IPv4 or IPv6 network in CIDR notation (`10.0.0.0/8`, `::1/128`; a bare
/// address is the network of just that address). IPv4-mapped IPv6 addresses
/// compare as their IPv4 address.
public struct IPNetwork: Sendable, Hashable, CustomStringConvertible {
    let bytes: [UInt8]
    let prefixLength: Int
    public let description: String

    public init(_ text: String) throws(IngestConfigurationError) {
        let parts = text.split(separator: "/", maxSplits: 1).map(String.init)
        guard let first = parts.first, let bytes = Self.bytes(parsing: first) else {
            throw IngestConfigurationError(description: "--trusted-proxy '\(text)': expected an IP address or a CIDR network such as 10.0.0.0/8")
        }
        let bits = bytes.count * 8
        let length = parts.count == 2 ? Int(parts[1]) : bits
        guard let length, (0...bits).contains(length) else {
            throw IngestConfigurationError(description: "--trusted-proxy '\(text)': the prefix length must be 0…\(bits)")
        }
        self.bytes = bytes
        prefixLength = length
        description = text
    }

    func contains(_ address: [UInt8]) -> Bool {
        guard address.count == bytes.count else { return false }
        var remaining = prefixLength
        for (a, b) in zip(address, bytes) where remaining > 0 {
            let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
            if a & mask != b & mask { return false }
            remaining -= 8
        }
        return true
    }

    /// The address's bytes (4 or 16), or nil when `text` is not an IP address.
    static func bytes(parsing text: String) -> [UInt8]? {
        let bare = text.hasPrefix("[") && text.hasSuffix("]") ? String(text.dropFirst().dropLast()) : text
        var buffer = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET, bare, &buffer) == 1 { return Array(buffer.prefix(4)) }
        guard inet_pton(AF_INET6, bare, &buffer) == 1 else { return nil }
        let mapped = buffer.prefix(10).allSatisfy { $0 == 0 } && buffer[10] == 0xFF && buffer[11] == 0xFF
        return mapped ? Array(buffer.suffix(4)) : buffer
    }

    static func bytes(of address: SocketAddress) -> [UInt8]? {
        address.ipAddress.flatMap(bytes(parsing:))
    }
}

extension HTTPField.Name {
    // Constant, valid field names: the initializer fails only for invalid tokens.
    static let xForwardedHost = Self("X-Forwarded-Host")!
    static let xForwardedProto = Self("X-Forwarded-Proto")!
    static let xForwardedFor = Self("X-Forwarded-For")!
}
