import CompressNIO
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Reads a request body within the limits: the raw body and, for
/// `Content-Encoding: gzip`, the inflated body may each be at most `limit`
/// bytes; inflating stops as soon as the output passes the limit, so a gzip
/// bomb never inflates in memory. The whole body must arrive within
/// `timeout`: a client trickling it a byte at a time gets 408, not a request
/// handler for as long as it likes.
enum RequestBodyReader {
    static func read(_ request: Request, limit: Int, timeout: Duration = .seconds(30)) async throws(APIError) -> Data {
        try checkContentType(request)
        let encoding = request.headers[.contentEncoding]?.trimmingCharacters(in: .whitespaces).lowercased() ?? "identity"
        guard ["identity", "gzip", "x-gzip", ""].contains(encoding) else {
            throw APIError(
                status: .unsupportedMediaType, code: "unsupported_content_encoding",
                message: "Content-Encoding '\(encoding)' is not supported; send identity or gzip", field: "Content-Encoding")
        }
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            throw tooLarge(limit, after: false)
        }
        var buffer: ByteBuffer
        do {
            let body = request.body
            buffer = try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
                group.addTask {
                    var collected = ByteBuffer()
                    for try await chunk in body {
                        try Task.checkCancellation()
                        guard collected.readableBytes + chunk.readableBytes <= limit else { throw tooLarge(limit, after: false) }
                        var chunk = chunk
                        collected.writeBuffer(&chunk)
                    }
                    return collected
                }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    return nil
                }
                let first = try await group.next()
                group.cancelAll()
                guard let whole = first ?? nil else {
                    throw APIError(
                        status: .requestTimeout, code: "body_timeout",
                        message: "the body did not arrive within \(timeout.components.seconds) s", field: "body")
                }
                return whole
            }
        } catch let error as APIError {
            throw error
        } catch {
            throw APIError(status: .badRequest, code: "invalid_body", message: "the request body could not be read", field: "body")
        }
        if encoding == "gzip" || encoding == "x-gzip" {
            do {
                let inflated = try buffer.decompress(with: .gzip(), maxSize: limit + 1)
                guard inflated.readableBytes <= limit else { throw tooLarge(limit, after: true) }
                return Data(inflated.readableBytesView)
            } catch let error as APIError {
                throw error
            } catch let error as CompressNIOError where error == .bufferOverflow {
                throw tooLarge(limit, after: true)
            } catch {
                throw APIError(
                    status: .badRequest, code: "invalid_gzip", message: "the body is not valid gzip data", field: "body")
            }
        }
        return Data(buffer.readableBytesView)
    }

    /// JSON only (`application/json`, with any parameters, or a `+json` type);
    /// a missing Content-Type is taken as JSON, and so is `text/plain`, which
    /// browsers' SDKs send so that a post needs no CORS preflight.
    static func checkContentType(_ request: Request) throws(APIError) {
        guard let value = request.headers[.contentType] else { return }
        let mediaType = value.split(separator: ";", maxSplits: 1).first.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        } ?? ""
        if mediaType == "application/json" || mediaType == "text/plain"
            || (mediaType.hasPrefix("application/") && mediaType.hasSuffix("+json")) { return }
        throw APIError(
            status: .unsupportedMediaType, code: "unsupported_media_type",
            message: "Content-Type '\(mediaType)' is not supported; send application/json (or text/plain holding JSON)",
            field: "Content-Type")
    }

    static func tooLarge(_ limit: Int, after: Bool) -> APIError {
        APIError(
            status: .contentTooLarge, code: "body_too_large",
            message: after
                ? "the body is over \(limit / 1024) KB after gzip decompression"
                : "the body is over \(limit / 1024) KB",
            field: "body")
    }
}
