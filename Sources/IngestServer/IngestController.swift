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
    let bodyTimeout: Duration
    let refusalPause: Duration
    let forwarding: Forwarding
    let logger: Logger

    /// Segment's one-letter aliases are accepted too (`/v1/t` = `/v1/track`, …).
    static let singlePaths: [(String, MessageType)] = [
        ("track", .track), ("t", .track), ("screen", .screen), ("s", .screen), ("identify", .identify), ("i", .identify),
        ("page", .page), ("p", .page), ("group", .group), ("g", .group), ("alias", .alias), ("a", .alias),
    ]

    /// Under `/v1`, through `table`, which records them; each path also answers
    /// CORS preflights (`OPTIONS`).
    func addRoutes(to router: Router<IngestRequestContext>, table: inout RouteTable) {
        let batches: [(String, MessageType?)] = [("batch", nil), ("b", nil)]
        for (path, type) in batches + Self.singlePaths.map({ ($0.0, Optional($0.1)) }) {
            table.on(.post, "/v1/" + path, in: router) { request, context in
                try await pacingRefusals { () async throws(APIError) -> Response in
                    try await answeringOrigin(request, context) { allowedOrigin throws(APIError) in
                        try await ingest(request, context, single: type, allowedOrigin: &allowedOrigin)
                    }
                }
            }
            table.on(.options, "/v1/" + path, in: router) { request, _ in try await preflight(request, methods: "POST", key: nil) }
        }
        let settingsPath = "/v1/projects/:writeKey/settings"
        table.on(.get, settingsPath, in: router) { request, context in
            let key = context.parameters.get("writeKey") ?? ""
            return try await answeringOrigin(request, context) { allowedOrigin throws(APIError) in
                try await settings(request, context, key: key, allowedOrigin: &allowedOrigin)
            }
        }
        table.on(.options, settingsPath, in: router) { request, context in
            try await preflight(request, methods: "GET", key: context.parameters.get("writeKey") ?? "")
        }
    }

    /// Runs an ingest route, holding back a refusal (a 4xx other than 429:
    /// an unreadable, oversized or unauthorised request) until `refusalPause`
    /// after the request arrived. A well-behaved SDK never meets one, and
    /// drops the batch when it does; a client that loops on refused requests
    /// (garbage, oversized bodies, guessed keys) gets at most one answer a
    /// pause per connection, so it costs the server little, as an unknown
    /// key's wait for its 401 already did. Nothing is held meanwhile but the
    /// request's task: the body read so far is released, and the rest is
    /// left unread, so the client's upload stalls on TCP's flow control.
    /// 429 and 503 say when to come back and are answered at once.
    private func pacingRefusals(_ route: () async throws(APIError) -> Response) async throws(APIError) -> Response {
        let arrived = ContinuousClock.now
        do {
            return try await route()
        } catch {
            if (400..<500).contains(error.status.code), error.status != .tooManyRequests {
                try? await Task.sleep(until: arrived + refusalPause, clock: .continuous)
            }
            throw error
        }
    }

    /// Runs a route that sets `allowedOrigin` once its key allows the request's
    /// `Origin`, and adds the CORS headers for it to the answer, error or not.
    private func answeringOrigin(
        _ request: Request, _ context: IngestRequestContext,
        _ route: (inout String?) async throws(APIError) -> Response
    ) async throws(APIError) -> Response {
        var allowedOrigin: String?
        do {
            var response = try await route(&allowedOrigin)
            if let allowedOrigin { response.headers.append(contentsOf: CrossOrigin.responseHeaders(origin: allowedOrigin)) }
            return response
        } catch {
            var error = error
            error.allowOrigin = allowedOrigin
            throw error
        }
    }

    /// A CORS preflight: 204 with the CORS headers for an origin the path's
    /// key (`key`) or, for the ingest paths, which carry no key, any live key
    /// allows; 403 otherwise. Without `Origin` it is a plain `OPTIONS`: 204 with `Allow`.
    func preflight(_ request: Request, methods: String, key: String?) async throws(APIError) -> Response {
        guard let origin = request.headers[.origin] else {
            return Response(status: .noContent, headers: [.allow: methods + ", OPTIONS"])
        }
        let allowed: Bool
        do {
            if let key {
                allowed = try await keys.grant(forKey: key)?.allows(origin: origin) ?? false
            } else {
                allowed = try await keys.anyKeyAllows(origin: origin)
            }
        } catch {
            throw Self.keysUnavailable
        }
        guard allowed else { throw CrossOrigin.notAllowed(origin, byKey: key != nil) }
        return CrossOrigin.preflight(origin: origin, methods: methods + ", OPTIONS")
    }

    /// A batch (`single` nil) or one message of that type: stored, refused
    /// per message, or an `APIError` the router renders.
    func ingest(
        _ request: Request, _ context: IngestRequestContext, single: MessageType?, allowedOrigin: inout String?
    ) async throws(APIError) -> Response {
        let receivedAt = Timestamps.microseconds(Date())
        var key = Self.key(fromAuthorization: request.headers[.authorization])
        var grant: WriteKeyGrant?
        if let key {
            // A bad header key, or a page the key does not allow, fails before the body is read.
            (grant, allowedOrigin) = try await admit(key, request, context)
        }
        let body = try await RequestBodyReader.read(request, limit: maxBodyBytes, timeout: bodyTimeout)
        context.access.update { $0.bodyBytes = body.count }
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
        if key == nil, let bodyKey = batch.writeKey, !bodyKey.isEmpty {
            key = bodyKey
            (grant, allowedOrigin) = try await admit(bodyKey, request, context)
        }
        guard let key, let app = grant?.app else {
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
        let stored: [AppendOutcome]
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
        let accepted = stored.filter { $0 == .stored }.count, suppressed = stored.filter { $0 == .suppressed }.count
        let duplicates = stored.count - accepted - suppressed
        context.access.update {
            $0.accepted = accepted
            $0.duplicates = duplicates
            $0.suppressed = suppressed
            $0.rejected = outcome.rejections.count
        }
        metrics.messages(
            app: app, bytes: body.count, accepted: accepted, duplicates: duplicates, suppressed: suppressed,
            rejected: outcome.rejections.map(\.code), at: Double(receivedAt) / 1_000_000)
        // A suppressed message is answered as usual (a client must not
        // retry it), and counted apart (docs/privacy.md).
        return JSONBody.response(
            BatchResponse(
                accepted: accepted, duplicates: duplicates, suppressed: suppressed,
                rejected: outcome.rejections.map { .init(index: $0.index, messageId: $0.messageID, code: $0.code, message: $0.message) }))
    }

    /// The grant of a live key (its prefix noted for the access log) and the
    /// request's `Origin` when the key allows it (servers send none); 401 for
    /// an unknown or revoked key, 403 for an origin it does not allow (before
    /// anything is stored), 503 when keys cannot be checked.
    private func admit(
        _ key: String, _ request: Request, _ context: IngestRequestContext
    ) async throws(APIError) -> (WriteKeyGrant, allowedOrigin: String?) {
        context.access.update { $0.keyPrefix = WriteKeyStore.prefix(of: key) }
        let grant: WriteKeyGrant?
        do {
            grant = try await keys.grant(forKey: key)
        } catch {
            throw Self.keysUnavailable
        }
        guard let grant else {
            throw APIError(status: .unauthorized, code: "invalid_write_key", message: "the write key is unknown or revoked", field: "writeKey")
        }
        guard let origin = request.headers[.origin] else { return (grant, nil) }
        guard grant.allows(origin: origin) else { throw CrossOrigin.notAllowed(origin, byKey: true) }
        return (grant, origin)
    }

    static let keysUnavailable = APIError(
        status: .serviceUnavailable, code: "database_unavailable", message: "write keys cannot be checked right now; retry later",
        retryAfter: 1)

    /// The document Segment's SDKs fetch from their CDN host at start-up. Its
    /// `apiHost` is where they upload: the public address (`--public-url`, or
    /// what a trusted proxy forwarded), never an internal one the proxy used.
    func settings(
        _ request: Request, _ context: IngestRequestContext, key: String, allowedOrigin: inout String?
    ) async throws(APIError) -> Response {
        (_, allowedOrigin) = try await admit(key, request, context)
        let base = forwarding.publicBase(of: request, peer: context.remoteAddress)
        let document: JSONValue = .object([
            "integrations": .object([
                "Segment.io": .object([
                    "apiKey": .string(key), "apiHost": .string(base.host + "/v1"), "protocol": .string(base.scheme),
                    "unbundledIntegrations": .array([]),
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
