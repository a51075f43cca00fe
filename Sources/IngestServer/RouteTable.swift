import HTTPTypes
import Hummingbird

/// The paths the API serves and the methods of each, so a request the router
/// does not match is answered as HTTP says: 405 with `Allow` when the path
/// exists, 404 when it does not, both in the API's JSON error shape. Routes
/// are added to the router through it, so each path is spelled once.
struct RouteTable: Sendable {
    private var routes: [(segments: [Substring], methods: [HTTPRequest.Method])] = []

    /// Adds `handler` for `method` at `path` (as the router spells it:
    /// `/v1/projects/:writeKey/settings`) to `router`, and records it.
    mutating func on(
        _ method: HTTPRequest.Method, _ path: String, in router: Router<IngestRequestContext>,
        use handler: @escaping @Sendable (Request, IngestRequestContext) async throws -> some ResponseGenerator
    ) {
        router.on(RouterPath(path), method: method, use: handler)
        let segments = path.split(separator: "/")
        if let i = routes.firstIndex(where: { $0.segments == segments }) {
            routes[i].methods.append(method)
        } else {
            routes.append((segments, [method]))
        }
    }

    /// The methods served at `path`, or nil when no route has that path.
    func methods(at path: String) -> [HTTPRequest.Method]? {
        let segments = path.split(separator: "/")
        return routes.first { route in
            route.segments.count == segments.count
                && zip(route.segments, segments).allSatisfy { $0.first == ":" || $0 == $1 }
        }?.methods
    }
}

/// Added after every route, so it wraps only the router's not-found answer.
struct UnmatchedRouteMiddleware: RouterMiddleware {
    let table: RouteTable

    func handle(
        _ request: Request, context: IngestRequestContext, next: (Request, IngestRequestContext) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            guard let methods = table.methods(at: request.uri.path) else {
                throw APIError(status: .notFound, code: "not_found", message: "no such path: \(request.uri.path)")
            }
            let allow = methods.map(\.rawValue).joined(separator: ", ")
            var error = APIError(
                status: .methodNotAllowed, code: "method_not_allowed",
                message: "\(request.method.rawValue) is not served here; use \(allow)", field: "method")
            error.allow = allow
            throw error
        }
    }
}
