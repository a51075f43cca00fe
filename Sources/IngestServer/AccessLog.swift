import EventLog
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// One structured line per request (`onramp.access`): time (the log
/// handler's), method, path, status, key prefix, messages accepted, duplicate,
/// suppressed (when any) and rejected, body bytes, duration, client address. Never the key or the
/// body: a key in the settings path is cut to its prefix.
struct AccessLogMiddleware: RouterMiddleware {
    let logger: Logger
    let forwarding: Forwarding

    func handle(
        _ request: Request, context: IngestRequestContext, next: (Request, IngestRequestContext) async throws -> Response
    ) async throws -> Response {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            log(request, context, status: response.status.code, start: start)
            return response
        } catch let error as any HTTPResponseError {
            log(request, context, status: error.status.code, start: start)
            throw error
        } catch {
            log(request, context, status: 500, start: start)
            throw error
        }
    }

    private func log(_ request: Request, _ context: IngestRequestContext, status: Int, start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        let milliseconds = Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15
        let note = context.access.fields
        var metadata: Logger.Metadata = [
            "method": "\(request.method.rawValue)",
            "path": "\(Self.redacted(request.uri.path))",
            "status": "\(status)",
            "duration_ms": "\(String(format: "%.2f", milliseconds))",
            "client": "\(forwarding.client(of: request, peer: context.remoteAddress) ?? "-")",
        ]
        if let prefix = note.keyPrefix { metadata["key"] = "\(prefix)" }
        if let accepted = note.accepted { metadata["accepted"] = "\(accepted)" }
        if let duplicates = note.duplicates { metadata["duplicates"] = "\(duplicates)" }
        if let suppressed = note.suppressed, suppressed > 0 { metadata["suppressed"] = "\(suppressed)" }
        if let rejected = note.rejected { metadata["rejected"] = "\(rejected)" }
        if let bytes = note.bodyBytes ?? request.headers[.contentLength].flatMap(Int.init) { metadata["bytes"] = "\(bytes)" }
        logger.info("request", metadata: metadata)
    }

    /// The path with a write key (the settings document's path segment) cut to the key's prefix.
    static func redacted(_ path: String) -> String {
        var segments = path.split(separator: "/", omittingEmptySubsequences: false)
        if segments.count == 5, segments[1] == "v1", segments[2] == "projects", segments[4] == "settings" {
            segments[3] = Substring(WriteKeyStore.prefix(of: String(segments[3])) + "…")
        }
        return segments.joined(separator: "/")
    }
}
