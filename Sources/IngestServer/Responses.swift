import EventLog
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `200` body: Segment clients look only at the status; others read the counts.
struct BatchResponse: Codable, Sendable {
    struct Rejected: Codable, Sendable {
        var index: Int
        var messageId: String?
        var code: String
        var message: String
    }

    var success = true
    var accepted: Int
    var duplicates: Int
    /// Not stored: they carry an id erased and kept out (docs/privacy.md).
    var suppressed: Int
    var rejected: [Rejected]
}

/// `{"error": {"code", "message", "field"?}}` for every non-2xx answer.
struct ErrorBody: Codable, Sendable {
    struct Detail: Codable, Sendable {
        var code: String
        var message: String
        var field: String?
    }

    var error: Detail
}

/// Every failure the API answers: routes throw it, and the router renders it
/// in one place (`response(from:context:)`), so every error has the same shape.
struct APIError: HTTPResponseError, Sendable {
    var status: HTTPResponse.Status
    var code: String
    var message: String
    var field: String?
    var retryAfter: Int?
    /// For 405: the methods the path serves.
    var allow: String?
    /// The web origin the request's key allows: the page may read this error.
    var allowOrigin: String?

    static func badRequest(_ code: String, _ message: String, field: String) -> APIError {
        APIError(status: .badRequest, code: code, message: message, field: field)
    }

    init(status: HTTPResponse.Status, code: String, message: String, field: String? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retryAfter = retryAfter
    }

    func response(from request: Request, context: some RequestContext) -> Response { response }

    var response: Response {
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        if let allow { headers[.allow] = allow }
        if let allowOrigin { headers.append(contentsOf: CrossOrigin.responseHeaders(origin: allowOrigin)) }
        let body = ErrorBody(error: .init(code: code, message: message, field: field))
        return Response(status: status, headers: headers, body: .init(byteBuffer: JSONBody.encode(body)))
    }
}

enum JSONBody {
    static func encode(_ value: some Encodable) -> ByteBuffer {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return ByteBuffer(bytes: data)
    }

    static func response(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: encode(value)))
    }
}
