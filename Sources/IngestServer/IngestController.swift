import CoreMetrics
import EventLog
import Foundation
import HTTPTypes
import Hummingbird
import LibPQ
import Logging
import Migrations

/// The Segment-compatible routes: batches, single messages, SDK settings.
struct IngestController: Sendable {
    let keys: any WriteKeyLookup
    let committer: any EventSink
    let limiter: RateLimiter
    let metrics: IngestMetrics
    let policy: IngestPolicy
    let maxBodyBytes: Int
    let logger: Logger

    /// Segment's one-letter aliases are accepted too (`/v1/t` = `/v1/track`, …).
    static let singlePaths: [(String, MessageType)] = [
        ("track", .track), ("t", .track), ("screen", .screen), ("s", .screen), ("identify", .identify), ("i", .identify),
        ("page", .page), ("p", .page), ("group", .group), ("g", .group), ("alias", .alias), ("a", .alias),
    ]

    /// Under `/v1`, through `table`, which records them.
    func addRoutes(to router: Router<BasicRequestContext>, table: inout RouteTable) {
        let batches: [(String, MessageType?)] = [("batch", nil), ("b", nil)]
        for (path, type) in batches + Self.singlePaths.map({ ($0.0, Optional($0.1)) }) {
            table.on(.post, "/v1/" + path, in: router) { request, _ in try await ingest(request, single: type) }
        }
        table.on(.get, "/v1/projects/:writeKey/settings", in: router) { request, context in
            try await settings(request, key: context.parameters.get("writeKey") ?? "")
        }
    }

    /// A batch (`single` nil) or one message of that type: stored, refused
    /// per message, or an `APIError` the router renders.
    func ingest(_ request: Request, single: MessageType?) async throws(APIError) -> Response {
        let receivedAt = Timestamps.microseconds(Date())
        var key = Self.key(fromAuthorization: request.headers[.authorization])
        var app: String?
        if let key { app = try await lookUp(key) }  // a bad header key fails before the body is read
        let body = try await RequestBodyReader.read(request, limit: maxBodyBytes)
        let batch: IncomingBatch
        do {
            if let single {
                batch = try BatchDecoder.decodeSingle(body, type: single)
            } else {
                batch = try BatchDecoder.decodeBatch(body)
            }
        } catch {
            throw APIError.badRequest(error.code, error.message, field: error.field)
        }
        if key == nil {
            key = batch.writeKey
            if let key, !key.isEmpty { app = try await lookUp(key) }
        }
        guard let key, let app else {
            throw APIError(
                status: .unauthorized, code: "missing_write_key",
                message: "no write key: send HTTP Basic auth with the key as user name, a Bearer token, or \"writeKey\" in the body",
                field: "Authorization")
        }
        if let wait = limiter.acquire(key) {
            throw APIError(
                status: .tooManyRequests, code: "rate_limited", message: "too many requests for this write key; retry after \(wait) s",
                field: "Authorization", retryAfter: wait)
        }
        let outcome = MessageValidator.validate(batch, app: app, receivedAt: receivedAt, policy: policy)
        let quarantine = outcome.rejections.map { QuarantineEntry(app: app, receivedAt: receivedAt, rejection: $0) }
        let stored: [Bool]
        do {
            stored = try await committer.commit(outcome.events.map(\.event), quarantine: quarantine)
        } catch let unavailable as CommitUnavailable {
            let (code, message) = switch unavailable.reason {
            case .saturated: ("writer_saturated", "the writer is saturated; retry later")
            case .timedOut:
                ("commit_timeout",
                 "the event log did not confirm the commit in time; retry with the same messageIds (each is stored at most once)")
            case .databaseUnavailable, .shuttingDown: ("database_unavailable", "the event log is unavailable; retry later")
            }
            throw APIError(status: .serviceUnavailable, code: code, message: message, retryAfter: unavailable.retryAfterSeconds)
        } catch {
            logger.error("commit failed", metadata: ["error": "\(error)"])
            throw APIError(status: .internalServerError, code: "internal", message: "the events could not be stored")
        }
        let accepted = stored.filter { $0 }.count
        metrics.accepted.increment(by: accepted)
        metrics.duplicates.increment(by: stored.count - accepted)
        metrics.rejected.increment(by: outcome.rejections.count)
        return JSONBody.response(
            BatchResponse(
                accepted: accepted, duplicates: stored.count - accepted,
                rejected: outcome.rejections.map { .init(index: $0.index, messageId: $0.messageID, code: $0.code, message: $0.message) }))
    }

    private func lookUp(_ key: String) async throws(APIError) -> String {
        let app: String?
        do {
            app = try await keys.app(forKey: key)
        } catch {
            throw APIError(
                status: .serviceUnavailable, code: "database_unavailable", message: "write keys cannot be checked right now; retry later",
                retryAfter: 1)
        }
        guard let app else {
            throw APIError(status: .unauthorized, code: "invalid_write_key", message: "the write key is unknown or revoked", field: "writeKey")
        }
        return app
    }

    /// The document Segment's SDKs fetch from their CDN host at start-up.
    func settings(_ request: Request, key: String) async throws(APIError) -> Response {
        _ = try await lookUp(key)
        let host = request.head.authority ?? "127.0.0.1:8080"
        let document: JSONValue = .object([
            "integrations": .object([
                "Segment.io": .object([
                    "apiKey": .string(key), "apiHost": .string(host + "/v1"), "unbundledIntegrations": .array([]),
                ])
            ]),
            "plan": .object(["track": .object(["__default": .object(["enabled": .bool(true)])])]),
            "edgeFunction": .object([:]),
            "analyticsNextEnabled": .bool(false),
        ])
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: .init(string: document.canonicalText)))
    }

    /// The key from `Basic base64(key:)` (the key as user name, as Segment's SDKs
    /// send it; a key in the password with an empty user also works) or `Bearer key`.
    static func key(fromAuthorization value: String?) -> String? {
        guard let value else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2 else { return nil }
        let scheme = parts[0].lowercased()
        let credentials = parts[1].trimmingCharacters(in: .whitespaces)
        if scheme == "bearer" { return credentials.isEmpty ? nil : credentials }
        guard scheme == "basic", let data = Data(base64Encoded: credentials), let text = String(data: data, encoding: .utf8) else {
            return nil
        }
        let pair = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let user = pair.first.map(String.init) ?? ""
        if !user.isEmpty { return user }
        let password = pair.count > 1 ? String(pair[1]) : ""
        return password.isEmpty ? nil : password
    }
}
