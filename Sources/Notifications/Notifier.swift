import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// Posts the report's alert message (`onramp report --notify URL`) to a
/// webhook — Slack, Mattermost, or anything that takes a JSON POST — and
/// keeps trying through the failures a webhook has: connection refused, a
/// timeout, 429 and 5xx, with doubling delays (or the receiver's
/// `Retry-After`, up to a bound). A 4xx other than 408/429 is the message or
/// the URL being wrong: retrying cannot help, so it fails at once.
public struct Notifier: Sendable {
    public var url: String
    /// Tries in all, the first included.
    public var attempts = 5
    /// Before the second try; doubled before each further one.
    public var firstDelay: Duration = .seconds(1)
    /// The longest wait between tries, whatever `Retry-After` asks.
    public var longestDelay: Duration = .seconds(30)
    /// For each try.
    public var timeout: Duration = .seconds(10)

    public init(url: String) {
        self.url = url
    }

    /// Whether `url` is one this can post to: http or https, with a host.
    public static func accepts(_ url: String) -> Bool {
        guard let parsed = URL(string: url), parsed.host != nil else { return false }
        return ["http", "https"].contains(parsed.scheme?.lowercased() ?? "")
    }

    /// The URL as it may be logged: scheme, host and port. A webhook's path
    /// is its secret (Slack's and Mattermost's carry the token), and cron
    /// mails what a run prints.
    public static func redacted(_ url: String) -> String {
        guard let parsed = URL(string: url), let scheme = parsed.scheme, let host = parsed.host else { return "(the --notify URL)" }
        return "\(scheme)://\(host)\(parsed.port.map { ":\($0)" } ?? "")/…"
    }

    /// Why a message could not be delivered.
    public struct Undelivered: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Delivers `body` (JSON); returns the tries it took, or throws `Undelivered`
    /// with the last answer. `log` hears of every failed try.
    @discardableResult
    public func post(_ body: String, log: @Sendable (String) -> Void = { _ in }) async throws -> Int {
        guard Self.accepts(url) else {
            throw Undelivered(description: "--notify must be an http(s) URL (got \(Self.redacted(url)))")
        }
        let client = HTTPClient.shared
        var delay = firstDelay
        var last = ""
        for attempt in 1...max(1, attempts) {
            var request = HTTPClientRequest(url: url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "User-Agent", value: "onramp-report")
            request.body = .bytes(ByteBuffer(string: body))
            var wait = delay
            do {
                let response = try await client.execute(request, timeout: .nanoseconds(timeout.nanoseconds))
                let status = Int(response.status.code)
                _ = try? await response.body.collect(upTo: 64 * 1024)
                if (200..<300).contains(status) { return attempt }
                last = "HTTP \(status) from \(Self.redacted(url))"
                guard status >= 500 || status == 429 || status == 408 else { throw Undelivered(description: last + " (not retried)") }
                if let seconds = response.headers.first(name: "Retry-After").flatMap(Double.init), seconds >= 0 {
                    wait = max(delay, .milliseconds(Int64(seconds * 1_000)))
                }
            } catch let error as Undelivered {
                throw error
            } catch {
                last = "\(Self.redacted(url)): \(error)"
            }
            guard attempt < attempts else { break }
            log("notify: try \(attempt) of \(attempts) failed (\(last)); again in \(wait.seconds)s")
            try await Task.sleep(for: min(wait, longestDelay))
            delay *= 2
        }
        throw Undelivered(description: "\(last), after \(attempts) tries")
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// Whole and fractional seconds, for log lines.
    var seconds: String { String(format: "%.1f", Double(nanoseconds) / 1e9) }
}
