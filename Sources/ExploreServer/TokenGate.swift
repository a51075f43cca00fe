import Hummingbird

/// With a token configured, every API call carries it: as a bearer header,
/// or as the cookie a first visit with `?token=` sets (after which the page
/// reloads without it, so the token leaves the address bar and history).
/// The page itself holds no data and is served to anyone.
///
/// Without a token on a loopback address, a request must name a loopback
/// host: a web page elsewhere whose name is made to resolve to 127.0.0.1
/// (DNS rebinding) sends its own name, and is refused.
struct TokenGate<Context: RequestContext>: RouterMiddleware {
    static var cookie: String { "onramp_explore" }
    let token: String?
    let loopbackOnly: Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let token else {
            if loopbackOnly, !Self.namesLoopback(request.head.authority) {
                return ExploreResponse.error(.forbidden, "Host: the explorer on a loopback address answers to 127.0.0.1 and localhost only")
            }
            return try await next(request, context)
        }
        if request.uri.path == "/" {
            guard let offered = request.uri.queryParameters["token"].map(String.init) else { return try await next(request, context) }
            guard Self.same(offered, token) else { return ExploreResponse.error(.unauthorized, "token: not the explorer's token") }
            var response = Response(status: .seeOther, headers: [.location: "./", .cacheControl: "no-store"])
            response.setCookie(Cookie(name: Self.cookie, value: token, path: "/", httpOnly: true, sameSite: .strict))
            return response
        }
        let bearer = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        let offered = bearer ?? request.cookies[Self.cookie]?.value
        guard let offered, Self.same(offered, token) else {
            return ExploreResponse.error(.unauthorized, "not signed in: open the explorer with ?token=… (the operator's token)")
        }
        return try await next(request, context)
    }

    /// Whether a Host header names this machine (any port).
    static func namesLoopback(_ authority: String?) -> Bool {
        guard let authority else { return false }
        let host = authority.hasPrefix("[")
            ? String(authority.dropFirst().prefix { $0 != "]" })
            : String(authority.prefix { $0 != ":" })
        return ExploreConfiguration.isLoopback(host.lowercased())
    }

    /// Compares in time that does not depend on where the texts differ.
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
