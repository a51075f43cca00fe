import Foundation
import FoundationNetworking
import LibPQ
import LocalPostgres
import TestSupport
import Testing

/// The operators' metrics through the real tools (docs/operations.md,
/// "Metrics"): Prometheus scrapes a running `onramp serve` on its metrics
/// listener and node_exporter's textfile collector, which reads the file a
/// real `onramp report --metrics-file` wrote, and the explorer behind its
/// token; the series hold what was posted and asked, and every panel of
/// the pipeline dashboard parses and has data.
@Suite("Prometheus scraping onramp serve and a report's metrics file", .serialized)
struct PrometheusScrapeTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// A tool's process, killed (SIGKILL) and waited for at the end.
    final class Tool {
        let process = Process()

        init(_ path: String, _ arguments: [String], log: URL) throws {
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = arguments
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            process.standardOutput = try FileHandle(forWritingTo: log)
            process.standardError = try FileHandle(forWritingTo: log)
            try process.run()
        }

        func stop() {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
    }

    /// An instant query's result: each series' labels and value.
    static func query(_ base: String, _ expression: String) async throws -> (ok: Bool, series: [(labels: [String: String], value: Double)]) {
        var components = URLComponents(string: base + "/api/v1/query")
        components?.queryItems = [URLQueryItem(name: "query", value: expression)]
        guard let url = components?.url else { return (false, []) }
        let (data, _) = try await URLSession.shared.data(from: url)
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let results = (object?["data"] as? [String: Any])?["result"] as? [[String: Any]] ?? []
        return (object?["status"] as? String == "success", results.map { result in
            let value = (result["value"] as? [Any])?.last as? String
            return ((result["metric"] as? [String: String]) ?? [:], value.flatMap(Double.init) ?? .nan)
        })
    }

    // The limit guards against a hang, not for speed: in the whole suite on two
    // cores, many tests take about five minutes.
    @Test("what Prometheus scrapes equals what was posted per app and what the report did; every pipeline panel has data", .timeLimit(.minutes(8)))
    func scraped() async throws {
        for tool in ["/usr/bin/prometheus", "/usr/bin/prometheus-node-exporter"] {
            try #require(FileManager.default.isExecutableFile(atPath: tool), "\(tool) is missing: scripts/test installs it (apt-get install prometheus prometheus-node-exporter) — this test does not skip")
        }
        let db = try await TestDatabase.create()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("prometheus-\(UUID().uuidString)")
        let textfiles = scratch.appendingPathComponent("textfile")
        try FileManager.default.createDirectory(at: textfiles, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }

        // Traffic: yoked three messages and one refused, ops two.
        var keys: [String: String] = [:]
        for app in ["yoked", "ops"] {
            keys[app] = try OnrampBinary.run(["keys", "create", "--app", app, "--database-url", db.url]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let serve = try await ServeProcess.start(["--database-url", db.url])
        defer { serve.stop() }
        func post(_ app: String, _ messages: [String]) async throws -> Int {
            var request = URLRequest(url: serve.base.appendingPathComponent("v1/batch"))
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.setValue("Basic " + Data("\(keys[app] ?? ""):".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
            request.httpBody = Data(#"{"batch":[\#(messages.joined(separator: ","))]}"#.utf8)
            return ((try await URLSession.shared.data(for: request)).1 as? HTTPURLResponse)?.statusCode ?? 0
        }
        func track(_ id: String) -> String { #"{"type":"track","event":"opened","messageId":"\#(id)","anonymousId":"d-\#(id)"}"# }
        var answered = 0
        for _ in 0..<100 where answered != 200 {
            answered = (try? await post("yoked", [track("y1"), track("y2"), track("y3"), #"{"type":"track","messageId":"bad","anonymousId":"d"}"#])) ?? 0
            if answered != 200 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(answered == 200)
        #expect(try await post("ops", [track("o1"), track("o2")]) == 200)
        let metricsFile = textfiles.appendingPathComponent("onramp-report.prom")
        let report = try OnrampBinary.run(["report", "--quiet", "--format", "json", "--metrics-file", metricsFile.path, "--database-url", db.url])
        #expect(report.status == 0, "\(report.stderr)")

        // The explorer, behind a token, one query asked of it.
        let token = "prometheus-test-token-0123456789"
        let explorerPort = try LocalCluster.freePort()
        let explorer = try Tool(
            OnrampBinary.url.path,
            ["explore", "--port", "\(explorerPort)", "--token", token, "--cache", scratch.appendingPathComponent("explore-cache").path,
             "--database-url", db.url],
            log: scratch.appendingPathComponent("explore.log"))
        defer { explorer.stop() }
        var asked: Int?
        for _ in 0..<100 where asked != 202 {
            var request = URLRequest(url: try #require(URL(string: "http://127.0.0.1:\(explorerPort)/api/queries")))
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            request.httpBody = Data(#"{"definition": {"app": "yoked", "steps": [{"event": "opened"}, {"event": "closed"}]}}"#.utf8)
            asked = ((try? await URLSession.shared.data(for: request))?.1 as? HTTPURLResponse)?.statusCode
            if asked != 202 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(asked == 202)

        let exporterPort = try LocalCluster.freePort()
        let exporter = try Tool(
            "/usr/bin/prometheus-node-exporter",
            ["--web.listen-address=127.0.0.1:\(exporterPort)", "--collector.disable-defaults", "--collector.textfile",
             "--collector.textfile.directory=\(textfiles.path)"],
            log: scratch.appendingPathComponent("node-exporter.log"))
        defer { exporter.stop() }
        let prometheusPort = try LocalCluster.freePort()
        let config = scratch.appendingPathComponent("prometheus.yml")
        try """
            global: {scrape_interval: 1s, evaluation_interval: 1s}
            rule_files: [\(Self.root.appendingPathComponent("dashboards/prometheus/onramp-rules.yml").path)]
            scrape_configs:
              - job_name: onramp
                static_configs: [{targets: ["127.0.0.1:\(serve.metricsPort ?? 0)"]}]
              - job_name: node
                static_configs: [{targets: ["127.0.0.1:\(exporterPort)"]}]
              - job_name: explore
                authorization: {credentials: \(token)}
                static_configs: [{targets: ["127.0.0.1:\(explorerPort)"]}]

            """.write(to: config, atomically: true, encoding: .utf8)
        let prometheus = try Tool(
            "/usr/bin/prometheus",
            ["--config.file=\(config.path)", "--storage.tsdb.path=\(scratch.appendingPathComponent("tsdb").path)",
             "--web.listen-address=127.0.0.1:\(prometheusPort)"],
            log: scratch.appendingPathComponent("prometheus.log"))
        defer { prometheus.stop() }
        let base = "http://127.0.0.1:\(prometheusPort)"

        // Both targets up, and a few scrapes of each: rates need two samples.
        var up = 0
        for _ in 0..<120 where up < 3 {
            try await Task.sleep(for: .milliseconds(500))
            up = ((try? await Self.query(base, "up == 1"))?.series.count) ?? 0
        }
        #expect(up == 3, "prometheus: \((try? String(contentsOf: scratch.appendingPathComponent("prometheus.log"), encoding: .utf8))?.suffix(1500) ?? "")")
        try await Task.sleep(for: .seconds(4))

        let accepted = try await Self.query(base, #"onramp_messages_total{outcome="accepted"}"#).series
        #expect(Dictionary(accepted.map { ($0.labels["app"] ?? "", $0.value) }) { first, _ in first } == ["yoked": 3, "ops": 2])
        #expect(try await Self.query(base, #"onramp_quarantined_messages_total{app="yoked",reason="missing_event"}"#).series.map(\.value) == [1])
        #expect(try await Self.query(base, #"onramp_job_success{command="report"}"#).series.map(\.value) == [1])
        #expect(try await Self.query(base, #"onramp_job_new_events{command="report"}"#).series.map(\.value) == [5])

        // Every panel of the pipeline dashboard: parsed by Prometheus, with data.
        let dashboard = try JSONSerialization.jsonObject(
            with: Data(contentsOf: Self.root.appendingPathComponent("dashboards/grafana/dashboards/pipeline.json"))) as? [String: Any]
        var expressions = 0
        for panel in dashboard?["panels"] as? [[String: Any]] ?? [] {
            for target in panel["targets"] as? [[String: Any]] ?? [] {
                guard let expression = target["expr"] as? String else { continue }
                expressions += 1
                let answer = try await Self.query(base, expression)
                #expect(answer.ok, "\(panel["title"] ?? ""): \(expression) does not parse")
                #expect(!answer.series.isEmpty, "\(panel["title"] ?? ""): \(expression) has no data")
            }
        }
        #expect(expressions >= 19)
        #expect(try await Self.query(base, #"onramp_explore_queries_total{outcome="done"}"#).series.map(\.value) == [1])
        // Every series docs/ingestion.md, docs/explore.md and docs/operations.md name, as Prometheus holds them.
        let (namesData, _) = try await URLSession.shared.data(from: try #require(URL(string: base + "/api/v1/label/__name__/values")))
        let names = ((try JSONSerialization.jsonObject(with: namesData) as? [String: Any])?["data"] as? [String] ?? []).filter { $0.hasPrefix("onramp") }
        print("prometheus holds: \(names.joined(separator: " "))")
        let documented = [
            "onramp_messages_total", "onramp_quarantined_messages_total", "onramp_received_bytes_total", "onramp_last_accepted_timestamp_seconds",
            "onramp_http_requests_total", "onramp_commit_duration_seconds_bucket", "onramp_group_commit_requests_bucket",
            "onramp_commit_queue_requests", "onramp_db_pool_connections", "onramp_db_pool_waiters",
            "onramp_job_success", "onramp_job_exit_status", "onramp_job_last_run_timestamp_seconds", "onramp_job_last_success_timestamp_seconds",
            "onramp_job_duration_seconds", "onramp_job_new_events", "onramp_job_events_read", "onramp_job_persons_recomputed",
            "onramp_explore_queries_total", "onramp_explore_queries_running", "onramp_explore_query_duration_seconds_bucket",
            "onramp_explore_store_bytes",
        ]
        #expect(Set(documented).subtracting(names).isEmpty, "missing: \(Set(documented).subtracting(names).sorted())")
        // The rules load in the real server too.
        let (rulesData, _) = try await URLSession.shared.data(from: try #require(URL(string: base + "/api/v1/rules")))
        #expect(String(decoding: rulesData, as: UTF8.self).contains("OnrampNightlyReportStale"))
        try await db.drop()
    }
}
