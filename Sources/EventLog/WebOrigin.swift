import Foundation

/// A web origin as browsers send it in `Origin`: `scheme://host[:port]`,
/// lowercase, without the scheme's default port. Write keys list allowed
/// origins in this form, so a stored origin and a request's compare as strings.
public enum WebOrigin {
    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// `origin` in canonical form, or `Invalid` saying what an origin must look like.
    public static func normalize(_ origin: String) throws(Invalid) -> String {
        let text = origin.trimmingCharacters(in: .whitespaces)
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
              ["http", "https"].contains(scheme), let host = components.host?.lowercased(), !host.isEmpty
        else {
            throw Invalid(description: "'\(origin)' is not a web origin: expected scheme://host[:port], e.g. https://app.example.com")
        }
        guard components.user == nil, components.password == nil, components.query == nil, components.fragment == nil,
              components.path.isEmpty || components.path == "/"
        else {
            throw Invalid(description: "'\(origin)' has more than an origin: give only scheme://host[:port], no path, query or user")
        }
        // An IPv6 literal keeps its brackets, as in the Origin header.
        let hostPart = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        let defaultPort = scheme == "https" ? 443 : 80
        let port = components.port.flatMap { $0 == defaultPort ? nil : $0 }
        return "\(scheme)://\(hostPart)" + (port.map { ":\($0)" } ?? "")
    }
}
