import HTTPTypes
import Hummingbird

/// CORS for web pages posting directly (analytics.js, `fetch`, `sendBeacon`).
/// Each write key lists the origins allowed to use it. A response to an
/// allowed origin names that origin (never `*`); any other origin gets no CORS
/// headers, a 403 on preflight, and a 403 on the request itself, which a
/// browser sends without a preflight when it is a `text/plain` POST or a beacon.
enum CrossOrigin {
    /// What a page may send: Segment's SDKs authenticate with Basic auth and may gzip.
    static let allowedHeaders = "Authorization, Content-Type, Content-Encoding"
    /// Browsers cache a preflight for at most this long (Chromium caps it at 2 h).
    static let maxAgeSeconds = 7_200

    /// The headers a response to an allowed `origin` carries.
    static func responseHeaders(origin: String) -> HTTPFields {
        [
            .accessControlAllowOrigin: origin,
            .accessControlExposeHeaders: "Retry-After",
            .vary: "Origin",
        ]
    }

    /// The answer to a preflight from an allowed `origin` for a path serving `methods`.
    static func preflight(origin: String, methods: String) -> Response {
        var headers = responseHeaders(origin: origin)
        headers[.accessControlAllowMethods] = methods
        headers[.accessControlAllowHeaders] = allowedHeaders
        headers[.accessControlMaxAge] = String(maxAgeSeconds)
        headers[.vary] = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
        return Response(status: .noContent, headers: headers)
    }

    /// 403 for a request (`byKey`) or a preflight whose origin no key allows.
    static func notAllowed(_ origin: String, byKey: Bool) -> APIError {
        APIError(
            status: .forbidden, code: "origin_not_allowed",
            message: (byKey ? "the origin '\(origin)' may not send with this write key" : "no write key allows the origin '\(origin)'")
                + "; allow it with `onramp keys allow-origin KEY \(origin)`",
            field: "Origin")
    }
}
