import Foundation
import LocalPostgres
import NIOHTTP1
import TestSupport
import Testing

/// The explorer's persons, paths and events over HTTP: a page of a cell's
/// persons and the next, the whole list as CSV, the paths' tree, a
/// person's events, each equal to what `onramp funnel` prints for the same
/// funnel; bad cells refused naming them.
@Suite("the explorer's persons behind a number, over HTTP")
struct PersonRoutesTests {
    static let definition = #"{"app": "yoked", "window": "1h", "breakdowns": ["context.os.name"], "steps": [{"event": "onboarding_started"}, {"event": "phone_entered"}, {"event": "otp_verified"}, {"event": "profile_created"}]}"#

    @Test("pages, CSV, paths and events are what the terminal lists; bad cells are refused naming them")
    func personsOverHTTP() async throws {
        let harness = try await ExplorerHarness.make(seed: 9)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("persons-http-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let terminal = [
            "funnel", "--database-url", harness.analystURL, "--app", "yoked", "--step", "onboarding_started", "--step", "phone_entered",
            "--step", "otp_verified", "--step", "profile_created", "--window", "1h", "--breakdown", "context.os.name", "--quiet",
            "--cache", scratch.appendingPathComponent("cache").path,
        ]
        let csv = try OnrampBinary.run(terminal + ["--persons", "reached:2", "--format", "csv"])
        #expect(csv.status == 0, "\(csv.stderr)")
        let ids = csv.stdout.split(separator: "\n").dropFirst().map { String($0.split(separator: ",")[0]) }
        #expect(ids.count > 100, "a list longer than a page: \(ids.count)")
        let tree = try OnrampBinary.run(terminal + ["--paths-after", "2", "--format", "json"])

        try await harness.withExplorer { base in
            func post(_ path: String, _ extra: String) async throws -> ExplorerHarness.Reply {
                try await ExplorerHarness.send(.POST, "\(base)/api/\(path)", body: #"{"definition": \#(Self.definition), \#(extra)}"#)
            }
            let first = try await post("persons", #""persons": "reached:2""#)
            #expect(first.status == 200, "\(first.body)")
            let listed = (first.json["persons"] as? [[String: Any]] ?? []).compactMap { $0["person_id"] as? String }
            #expect(first.json["total"] as? Int == ids.count && listed == Array(ids.prefix(100)) && first.json["next"] as? Int == 100)
            #expect((first.json["command"] as? String)?.contains("--persons reached:2") == true)
            let second = try await post("persons", #""persons": "reached:2", "offset": 100, "limit": 1000"#)
            let rest = (second.json["persons"] as? [[String: Any]] ?? []).compactMap { $0["person_id"] as? String }
            #expect(listed + rest == ids && second.json["next"] is NSNull, "\(second.body.prefix(300))")
            // The whole list as CSV: the terminal's, but for the seconds since the last step, taken at each one's clock.
            let download = try await post("persons", #""persons": "reached:2", "format": "csv""#)
            #expect(download.header("Content-Type")?.hasPrefix("text/csv") == true && download.header("Content-Disposition")?.contains("attachment") == true)
            func withoutSeconds(_ text: String) -> [[String]] {
                text.split(separator: "\n").map { line in
                    var fields = CSVLine.fields(String(line))
                    if fields.count > 7 { fields.remove(at: 7) }
                    return fields
                }
            }
            #expect(withoutSeconds(download.body) == withoutSeconds(csv.stdout))
            // Where those who dropped at step 2 went: the terminal's tree.
            let paths = try await post("paths", #""step": 2"#)
            let expected = try #require(try JSONSerialization.jsonObject(with: Data(tree.stdout.utf8)) as? NSDictionary)
            #expect(NSDictionary(dictionary: paths.json) == expected, "\(paths.body) vs \(tree.stdout)")
            // One person's events, by their ids.
            let person = try #require((first.json["persons"] as? [[String: Any]])?.first)
            let events = try await ExplorerHarness.send(
                .POST, "\(base)/api/person-events",
                body: Self.jsonText(["app": "yoked", "ids": person["ids"] ?? [], "from": person["chain_start"] ?? "", "to": person["last_step_time"] ?? ""]))
            let labels = (events.json["events"] as? [[String: Any]] ?? []).compactMap { $0["label"] as? String }
            #expect(labels.first == "onboarding_started" && labels.last == "phone_entered", "\(events.body)")
            // Bad cells, named.
            for (extra, message) in [
                (#""persons": "left:2""#, "unknown outcome 'left'"), (#""persons": "dropped:9""#, "out of range"),
                (#""persons": "converted:4""#, "last required step"),
                (#""persons": "reached:1", "breakdown_value": "context.os.name=Symbian""#, "no context.os.name=Symbian"),
            ] {
                let refused = try await post("persons", extra)
                #expect(refused.status == 400 && (refused.json["error"] as? String)?.contains(message) == true, "\(extra): \(refused.body)")
            }
            let lastStep = try await post("paths", #""step": 4"#)
            #expect(lastStep.status == 400 && lastStep.body.contains("last required step"), "\(lastStep.body)")
        }
        try await harness.close()
    }

    static func jsonText(_ object: [String: Any]) -> String {
        String(decoding: (try? JSONSerialization.data(withJSONObject: object)) ?? Data(), as: UTF8.self)
    }
}
