import Foundation
import IngestServer
import NIOHTTP1
import Testing
import Yams

/// Real responses checked against openapi.yaml: each status must be declared
/// for its route, and the declared schema's required fields must be present.
@Suite struct OpenAPITests {
    static let specURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("openapi.yaml")

    struct Spec {
        let root: [String: Any]

        func resolve(_ node: Any?) -> [String: Any]? {
            guard var dict = node as? [String: Any] else { return nil }
            while let ref = dict["$ref"] as? String {
                var target: Any? = root
                for part in ref.dropFirst(2).split(separator: "/") { target = (target as? [String: Any])?[String(part)] }
                guard let resolved = target as? [String: Any] else { return nil }
                dict = resolved
            }
            return dict
        }

        /// Checks status and required fields (recursively through objects); returns problems.
        func check(path: String, method: String, status: Int, body: String) -> [String] {
            guard let operation = (root["paths"] as? [String: Any]).flatMap({ $0[path] as? [String: Any] })?[method] as? [String: Any],
                let responses = operation["responses"] as? [String: Any]
            else { return ["\(method) \(path) is not in openapi.yaml"] }
            guard let response = resolve(responses[String(status)]) else { return ["\(method) \(path): status \(status) not declared"] }
            guard let content = response["content"] as? [String: Any] else { return [] }
            guard let schema = resolve((content["application/json"] as? [String: Any])?["schema"]) else { return [] }
            guard let json = try? JSONSerialization.jsonObject(with: Data(body.utf8)) else { return ["\(method) \(path) \(status): body is not JSON"] }
            return problems(json, schema, at: "$")
        }

        func problems(_ value: Any, _ schema: [String: Any], at location: String) -> [String] {
            guard let object = value as? [String: Any] else {
                return (schema["type"] as? String) == "object" ? ["\(location) is not an object"] : []
            }
            var found: [String] = []
            for name in schema["required"] as? [String] ?? [] where object[name] == nil {
                found.append("\(location).\(name) is required")
            }
            for (name, sub) in schema["properties"] as? [String: Any] ?? [:] {
                guard let child = object[name], let childSchema = resolve(sub) else { continue }
                found += problems(child, childSchema, at: "\(location).\(name)")
                if let items = resolve(childSchema["items"]), let array = child as? [Any] {
                    for (i, element) in array.enumerated() { found += problems(element, items, at: "\(location).\(name)[\(i)]") }
                }
            }
            return found
        }
    }

    @Test func responsesMatchTheContract() async throws {
        try await withServer(configure: { $0.rateLimitPerSecond = 0.001; $0.rateLimitBurst = 12 }) { h in
            let text = try String(contentsOf: Self.specURL, encoding: .utf8)
            let spec = Spec(root: try #require(try Yams.load(yaml: text) as? [String: Any]))
            var seen: [(String, String, Harness.Reply)] = []
            seen.append(("/v1/batch", "post", try await h.post(json: Fixtures.batch([Fixtures.track("o1"), #"{"type":"track"}"#]))))
            seen.append(("/v1/b", "post", try await h.post("/v1/b", json: Fixtures.batch([Fixtures.track("o2")]))))
            seen.append(("/v1/track", "post", try await h.post("/v1/track", json: #"{"event":"e","anonymousId":"a"}"#)))
            seen.append(("/v1/screen", "post", try await h.post("/v1/screen", json: #"{"name":"s","anonymousId":"a"}"#)))
            seen.append(("/v1/identify", "post", try await h.post("/v1/identify", json: #"{"userId":"u"}"#)))
            seen.append(("/v1/t", "post", try await h.send(
                .POST, "/v1/t", body: Array(#"{"event":"e","anonymousId":"a","writeKey":"\#(h.key)"}"#.utf8),
                headers: [("Content-Type", "text/plain;charset=UTF-8")])))
            seen.append(("/v1/batch", "post", try await h.post(json: Fixtures.batch([]), extraHeaders: [("Origin", "https://elsewhere.example")])))
            seen.append(("/v1/batch", "options", try await h.send(.OPTIONS, "/v1/batch")))
            seen.append(("/v1/b", "options", try await h.send(.OPTIONS, "/v1/b", headers: [("Origin", "https://elsewhere.example")])))
            seen.append(("/v1/projects/{writeKey}/settings", "options", try await h.send(
                .OPTIONS, "/v1/projects/\(h.key)/settings", headers: [("Origin", "https://elsewhere.example")])))
            seen.append(("/v1/batch", "post", try await h.post(json: "{")))
            seen.append(("/v1/batch", "post", try await h.post(json: "{}", key: "ork_bad")))
            seen.append(("/v1/batch", "post", try await h.post(json: "{}", extraHeaders: [("Content-Encoding", "br")])))
            seen.append(("/v1/batch", "post", try await h.post(json: String(repeating: " ", count: 600 * 1024))))
            for _ in 0..<7 { _ = try await h.post(json: Fixtures.batch([])) }
            let limited = try await h.post(json: Fixtures.batch([]))
            #expect(limited.status == 429)
            seen.append(("/v1/batch", "post", limited))
            seen.append(("/v1/projects/{writeKey}/settings", "get", try await h.send(.GET, "/v1/projects/\(h.key)/settings")))
            seen.append(("/v1/projects/{writeKey}/settings", "get", try await h.send(.GET, "/v1/projects/nope/settings")))
            seen.append(("/healthz", "get", try await h.send(.GET, "/healthz")))
            seen.append(("/readyz", "get", try await h.send(.GET, "/readyz")))
            #expect(Set(seen.map(\.2.status)) == [200, 204, 400, 401, 403, 413, 415, 429])
            for (path, method, reply) in seen {
                let problems = spec.check(path: path, method: method, status: reply.status, body: reply.body)
                #expect(problems.isEmpty, "\(method) \(path) \(reply.status): \(problems)")
            }
        }
    }
}
