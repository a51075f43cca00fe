import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// A closed-loop load generator over HTTP/1.1 keep-alive: `clients` tasks, each
/// on its own connection, each sending a batch of `batchSize` messages and
/// waiting for the (durable) acknowledgement before sending the next.
///
/// Written for the benchmark rather than reusing `OnrampClient`: the SDK's disk
/// queue and JSON encoding would make the generator, not the server, the
/// thing measured. Message ids are unique per run (`idPrefix-client-n`).
struct LoadGenerator: Sendable {
    struct Result: Sendable, Codable {
        var requests: Int
        var messages: Int
        var bodyBytes: Int
        var failures: Int
        var seconds: Double
        /// Request latencies in milliseconds, sorted.
        var latenciesMs: [Double]

        func percentile(_ p: Double) -> Double {
            guard !latenciesMs.isEmpty else { return 0 }
            let rank = Int((p / 100 * Double(latenciesMs.count - 1)).rounded())
            return latenciesMs[min(latenciesMs.count - 1, max(0, rank))]
        }
    }

    let url: String
    let writeKey: String
    let clients: Int
    let batchSize: Int
    let factory: MessageFactory
    let idPrefix: String

    /// Runs for `warmUp` (not counted) and then `duration`: requests completed in
    /// that window are counted; each client then finishes its request in flight.
    func run(client: HTTPClient, warmUp: Duration, duration: Duration) async throws -> Result {
        let started = ContinuousClock.now
        let measureFrom = started + warmUp
        let stopAt = measureFrom + duration
        let authorization = "Basic " + Data((writeKey + ":").utf8).base64EncodedString()
        let sentAt = MessageFactory.iso8601(Date())
        let templates = factory.templates
        let perClient: [ClientTally] = try await withThrowingTaskGroup(of: ClientTally.self) { group in
            for clientIndex in 0..<clients {
                group.addTask {
                    var tally = ClientTally()
                    var sequence = 0
                    var cursor = (clientIndex * 997) % templates.count
                    while true {
                        let now = ContinuousClock.now
                        if now >= stopAt { break }
                        var items: [(MessageFactory.Template, String)] = []
                        items.reserveCapacity(batchSize)
                        for _ in 0..<batchSize {
                            items.append((templates[cursor], "\(idPrefix)-\(clientIndex)-\(sequence)"))
                            cursor = (cursor + 1) % templates.count
                            sequence += 1
                        }
                        let body = MessageFactory.batchBody(items, sentAt: sentAt)
                        var request = HTTPClientRequest(url: url + "/v1/batch")
                        request.method = .POST
                        request.headers.add(name: "Content-Type", value: "application/json")
                        request.headers.add(name: "Authorization", value: authorization)
                        request.body = .bytes(ByteBuffer(bytes: body))
                        let sent = ContinuousClock.now
                        let ok: Bool
                        do {
                            let response = try await client.execute(request, timeout: .seconds(60))
                            _ = try await response.body.collect(upTo: 1 << 20)
                            ok = response.status == .ok
                        } catch {
                            ok = false
                        }
                        let done = ContinuousClock.now
                        // Counted by completion inside the window, so slow requests (large
                        // batches, many clients) still count for the part of the window they end in.
                        if done >= measureFrom && done <= stopAt {
                            if ok {
                                tally.requests += 1
                                tally.messages += batchSize
                                tally.bodyBytes += body.count
                                tally.latenciesMs.append((done - sent).seconds * 1_000)
                            } else {
                                tally.failures += 1
                            }
                        }
                        if !ok { try await Task.sleep(for: .milliseconds(50)) }
                    }
                    return tally
                }
            }
            var all: [ClientTally] = []
            for try await t in group { all.append(t) }
            return all
        }
        return Result(
            requests: perClient.reduce(0) { $0 + $1.requests }, messages: perClient.reduce(0) { $0 + $1.messages },
            bodyBytes: perClient.reduce(0) { $0 + $1.bodyBytes }, failures: perClient.reduce(0) { $0 + $1.failures },
            seconds: duration.seconds, latenciesMs: perClient.flatMap(\.latenciesMs).sorted())
    }

    private struct ClientTally: Sendable {
        var requests = 0
        var messages = 0
        var bodyBytes = 0
        var failures = 0
        var latenciesMs: [Double] = []
    }

    /// An HTTP/1.1-only client with one keep-alive connection per load client.
    static func makeClient(connections: Int) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.httpVersion = .http1Only
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(1, connections)
        configuration.connectionPool.idleTimeout = .seconds(120)
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }
}
