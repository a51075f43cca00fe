import EventLog
import Foundation
import LibPQ
import Simulation

/// Realistic Segment messages (the simulator's journeys, about 400 bytes of
/// JSON each) with a unique `messageId` per message, for load generators and
/// the raw COPY baseline alike.
///
/// A few thousand templates are generated once; a message is a template with a
/// fresh id spliced in, so producing load costs the generator almost nothing.
struct MessageFactory: Sendable {
    /// One generated message: the row fields for COPY and the JSON after `messageId`.
    struct Template: Sendable {
        let event: GeneratedEvent
        /// `"type":…,"timestamp":…,…}`: everything after the messageId member.
        let jsonTail: [UInt8]
    }

    let templates: [Template]
    /// Templates of each app, for clients holding that app's write key.
    let byApp: [String: [Template]]

    init(count: Int = 4_096, seed: UInt64 = 7, devicePrefix: String) {
        let now = Date()
        var templates: [Template] = []
        templates.reserveCapacity(count)
        HistoryGenerator.generate(
            count: count, from: now.addingTimeInterval(-20 * 3_600), to: now.addingTimeInterval(-60), seed: seed,
            devicePrefix: devicePrefix
        ) { e in
            templates.append(Template(event: e, jsonTail: Array(Self.tail(e).utf8)))
        }
        self.templates = templates
        byApp = Dictionary(grouping: templates, by: { $0.event.app })
    }

    /// Average size of a whole message (`{"messageId":"…",…}`) with an id of `idLength` bytes.
    func averageMessageBytes(idLength: Int = 24) -> Double {
        let tails = templates.reduce(0) { $0 + $1.jsonTail.count }
        return Double(tails) / Double(max(1, templates.count)) + Double(idLength + 15)
    }

    /// Appends one message with `id` to `body`.
    static func append(_ template: Template, id: String, to body: inout [UInt8]) {
        body.append(contentsOf: #"{"messageId":""#.utf8)
        body.append(contentsOf: id.utf8)
        body.append(contentsOf: #"","#.utf8)
        body.append(contentsOf: template.jsonTail)
    }

    /// `{"batch":[…],"sentAt":"…"}` for the given templates and ids.
    static func batchBody(_ items: some Sequence<(Template, String)>, sentAt: String) -> [UInt8] {
        var body: [UInt8] = []
        body.reserveCapacity(512 * 8)
        body.append(contentsOf: #"{"batch":["#.utf8)
        var first = true
        for (template, id) in items {
            if !first { body.append(UInt8(ascii: ",")) }
            first = false
            append(template, id: id, to: &body)
        }
        body.append(contentsOf: #"],"sentAt":""#.utf8)
        body.append(contentsOf: sentAt.utf8)
        body.append(contentsOf: #""}"#.utf8)
        return body
    }

    static func iso8601(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    private static func tail(_ e: GeneratedEvent) -> String {
        let timestamp = iso8601(Date(timeIntervalSince1970: Double(e.timestamp) / 1_000_000))
        var members = [#""type":\#(quote(e.type))"#]
        // Segment names a screen with "name" and a track with "event".
        if let name = e.event { members.append(e.type == "screen" ? #""name":\#(quote(name))"# : #""event":\#(quote(name))"#) }
        members.append(#""anonymousId":\#(quote(e.anonymousId))"#)
        if let user = e.userId { members.append(#""userId":\#(quote(user))"#) }
        if let group = e.groupId { members.append(#""groupId":\#(quote(group))"#) }
        members.append(#""timestamp":\#(quote(timestamp))"#)
        let traits = e.type == "identify" || e.type == "group"
        members.append(traits ? #""traits":\#(e.properties)"# : #""properties":\#(e.properties)"#)
        members.append(#""context":\#(e.context)"#)
        return members.joined(separator: ",") + "}"
    }

    /// A JSON string literal, escaped as the server's own canonical JSON writes it.
    static func quote(_ s: String) -> String {
        JSONValue.string(s).canonicalText
    }
}
