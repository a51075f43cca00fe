import Foundation
import Prometheus

/// The explorer's metrics for operators (docs/explore.md, "Metrics"): its
/// queries by how they ended and how long they took, those under way, and
/// how much its column stores hold on disk. Served at `GET /metrics`,
/// behind the explorer's token when one is set, on a registry of the
/// application's own.
final class ExploreMetrics: Sendable {
    enum Outcome: String, CaseIterable {
        case done, failed, cancelled, refused
    }

    private let registry = PrometheusCollectorRegistry()
    private let queries: [String: Counter]
    private let durations: DurationHistogram
    private let running: Gauge
    private let storeBytes: Gauge
    private let cacheRoot: URL

    init(cacheRoot: URL) {
        self.cacheRoot = cacheRoot
        func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: "onramp", subsystem: "explore", metricName: metric, unitName: unit, helpText: help)
        }
        var queries: [String: Counter] = [:]
        let ended = name("queries", "total", "Queries by how they ended: answered (done), failed, cancelled, or refused (too many at once).")
        for outcome in Outcome.allCases {
            queries[outcome.rawValue] = registry.makeCounter(descriptor: ended, labels: [("outcome", outcome.rawValue)])
        }
        self.queries = queries
        durations = registry.makeDurationHistogram(
            descriptor: name("query_duration", "seconds", "How long queries took from their start to their end, reading the log included."),
            buckets: [.milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
                      .seconds(30), .seconds(60), .seconds(120)])
        running = registry.makeGauge(descriptor: name("queries", "running", "Queries under way or waiting for a connection."))
        storeBytes = registry.makeGauge(descriptor: name("store", "bytes", "Bytes the explorer's column stores and kept answers hold on disk."))
    }

    func started() { running.increment() }

    /// One query ended (a refused one never started), after `duration`.
    func ended(_ outcome: Outcome, after duration: Duration?) {
        queries[outcome.rawValue]?.increment()
        guard let duration else { return }
        running.decrement()
        durations.recordNanoseconds(duration.components.seconds &* 1_000_000_000 &+ duration.components.attoseconds / 1_000_000_000)
    }

    /// Prometheus text, the stores' size measured now.
    func render() -> String {
        storeBytes.set(Double(Self.bytes(under: cacheRoot)))
        return registry.emitToString()
    }

    private static func bytes(under root: URL) -> Int {
        guard let files = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.fileSizeKey]) else { return 0 }
        var total = 0
        for case let file as URL in files {
            total += (try? file.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0
        }
        return total
    }
}
