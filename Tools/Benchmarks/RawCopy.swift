import Foundation
import LibPQ
import Simulation

/// The physical limit the server is measured against: the same messages
/// written straight into the same tables with COPY through libpq, no HTTP and
/// no JSON parsing. Like the server, each row goes to `events` and to the
/// `event_ids` ledger, and each chunk is one durable transaction.
enum RawCopy {
    struct Result: Sendable, Codable {
        var messages: Int
        var seconds: Double
        var chunks: Int
        var chunkSize: Int
        /// CPU seconds spent meanwhile by PostgreSQL and by this process.
        var postgresCPUSeconds: Double
        var ownCPUSeconds: Double
        var messagesPerSecond: Double { Double(messages) / seconds }
    }

    /// Writes chunks of `chunkSize` messages for about `duration`; returns what was written.
    static func run(
        url: String, factory: MessageFactory, duration: Duration, chunkSize: Int, idPrefix: String, postmaster: Int32?
    ) async throws -> Result {
        let pool = ConnectionPool(url: url, maxConnections: 1)
        let templates = factory.templates
        let cpuBefore = CPUUsage.sample(postmaster: postmaster)
        let started = ContinuousClock.now
        let deadline = started + duration
        var written = 0
        var chunks = 0
        do {
            while ContinuousClock.now < deadline {
                let offset = written
                try await pool.withConnection { c in
                    try writeChunk(c, templates: templates, offset: offset, count: chunkSize, idPrefix: idPrefix)
                }
                written += chunkSize
                chunks += 1
            }
        } catch {
            await pool.close()
            throw error
        }
        let elapsed = (ContinuousClock.now - started).seconds
        let cpuAfter = CPUUsage.sample(postmaster: postmaster)  // before the backend exits and takes its CPU time with it
        await pool.close()
        return Result(
            messages: written, seconds: elapsed, chunks: chunks, chunkSize: chunkSize,
            postgresCPUSeconds: cpuAfter.postgres(since: cpuBefore), ownCPUSeconds: cpuAfter.own - cpuBefore.own)
    }

    /// One transaction: reserve `count` sequence numbers, COPY the ledger rows, COPY the events.
    static func writeChunk(_ c: Connection, templates: [MessageFactory.Template], offset: Int, count: Int, idPrefix: String) throws {
        let receivedAt = Timestamps.microseconds(Date())
        try c.transaction { c in
            let last = try c.query("SELECT setval('event_seq', nextval('event_seq') + $1 - 1)", [.int(count)]).scalar(Int64.self)
            let first = last - Int64(count) + 1
            func row(_ i: Int) -> (MessageFactory.Template, String, Int64) {
                let n = offset + i
                return (templates[n % templates.count], "\(idPrefix)-\(n)", first + Int64(i))
            }
            _ = try c.copyIn("COPY event_ids (app, message_id, seq, received_at) FROM STDIN") { writer in
                for i in 0..<count {
                    let (t, id, seq) = row(i)
                    try writer.writeRow([.text(t.event.app), .text(id), .int(seq), .microseconds(receivedAt)])
                }
            }
            _ = try c.copyIn(
                """
                COPY events (seq, app, type, message_id, event, anonymous_id, user_id, "timestamp", original_timestamp,
                             sent_at, received_at, properties, context, traits, group_id) FROM STDIN
                """
            ) { writer in
                for i in 0..<count {
                    let (t, id, seq) = row(i)
                    let e = t.event
                    let identify = e.type == "identify" || e.type == "group"  // traits, not properties
                    try writer.writeRow([
                        .int(seq), .text(e.app), .text(e.type), .text(id), .optional(e.event), .text(e.anonymousId),
                        .optional(e.userId), .microseconds(e.timestamp), .microseconds(e.timestamp), .microseconds(receivedAt),
                        .microseconds(receivedAt), .text(identify ? "{}" : e.properties), .text(e.context),
                        identify ? .text(e.properties) : .null, .optional(e.groupId),
                    ])
                }
            }
        }
    }
}
