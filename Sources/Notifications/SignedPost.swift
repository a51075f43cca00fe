import AsyncHTTPClient
import Crypto
public import Foundation
import NIOCore
import NIOHTTP1

/// One signed POST of a JSON body, for receivers that must know it came from
/// Onramp (docs/audiences.md, "Delivering"): an `Onramp-Signature` header
/// `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, the scheme
/// Stripe's webhooks use, so a receiver checks the body and refuses an old
/// replay. One try: the caller keeps the ledger and decides when to try again.
public enum SignedPost {
    public enum Outcome: Sendable, Equatable {
        case delivered
        /// Try again later: the status or error, and the receiver's `Retry-After`, if it sent one.
        case failed(reason: String, retryAfter: Duration?)
    }

    /// `t=…,v1=…` for `body` signed with `secret` at `time` (unix seconds).
    public static func signature(body: String, secret: Data, time: Int64) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Data("\(time).\(body)".utf8), using: SymmetricKey(data: secret))
        return "t=\(time),v1=" + code.map { String(format: "%02x", $0) }.joined()
    }

    /// Posts `body` to `url`, signed; never throws: a failure is an outcome.
    public static func post(_ body: String, to url: String, secret: Data, timeout: Duration = .seconds(10)) async -> Outcome {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "onramp-audiences")
        request.headers.add(name: "Onramp-Signature", value: signature(body: body, secret: secret, time: Int64(Date().timeIntervalSince1970)))
        request.body = .bytes(ByteBuffer(string: body))
        do {
            let response = try await HTTPClient.shared.execute(request, timeout: .nanoseconds(timeout.nanoseconds))
            let status = Int(response.status.code)
            _ = try? await response.body.collect(upTo: 64 * 1024)
            if (200..<300).contains(status) { return .delivered }
            let retryAfter = response.headers.first(name: "Retry-After").flatMap(Double.init).flatMap { seconds in
                seconds >= 0 ? Duration.milliseconds(Int64(seconds * 1_000)) : nil
            }
            return .failed(reason: "HTTP \(status) from \(Notifier.redacted(url))", retryAfter: retryAfter)
        } catch {
            return .failed(reason: "\(Notifier.redacted(url)): \(error)", retryAfter: nil)
        }
    }
}
