import CoreMetrics
import LibPQ
import Metrics
import Prometheus
import NIOConcurrencyHelpers

/// The server's metrics, through swift-metrics, on a Prometheus registry of
/// the application's own (not the process-global bootstrap), so several
/// applications (tests) can live in one process; `GET /metrics` renders it.
final class IngestMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    // A pthread lock: ThreadSanitizer cannot see Synchronization.Mutex on Linux and reports false races.
    private let factory: PrometheusMetricsFactory
    let commitLatency: CoreMetrics.Timer
    let groupSize: CoreMetrics.Recorder
    let poolOpen: CoreMetrics.Gauge
    let poolIdle: CoreMetrics.Gauge
    let poolWaiting: CoreMetrics.Gauge
    let queueDepth: CoreMetrics.Gauge
    private let statusCounters = NIOLockedValueBox<[Int: CoreMetrics.Counter]>([:])
    /// By app (from its write key, never from a body, so as many as there
    /// are keys) and outcome or reason: made on first use.
    private let appCounters = NIOLockedValueBox<[AppSeries: CoreMetrics.Counter]>([:])
    private let lastAccepted = NIOLockedValueBox<[String: CoreMetrics.Gauge]>([:])

    private struct AppSeries: Hashable {
        var label: String
        var app: String
        var dimension: String
        var value: String
    }

    init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["onramp_commit_duration_seconds"] = [
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .seconds(2.5), .seconds(5),
        ]
        factory.valueHistogramBuckets["onramp_group_commit_requests"] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
        self.factory = factory
        commitLatency = CoreMetrics.Timer(label: "onramp_commit_duration_seconds", factory: factory)
        groupSize = CoreMetrics.Recorder(label: "onramp_group_commit_requests", factory: factory)
        poolOpen = CoreMetrics.Gauge(label: "onramp_db_pool_connections", dimensions: [("state", "open")], factory: factory)
        poolIdle = CoreMetrics.Gauge(label: "onramp_db_pool_connections", dimensions: [("state", "idle")], factory: factory)
        poolWaiting = CoreMetrics.Gauge(label: "onramp_db_pool_waiters", factory: factory)
        queueDepth = CoreMetrics.Gauge(label: "onramp_commit_queue_requests", factory: factory)
    }

    /// Counts one answered request by HTTP status.
    func request(status: Int) {
        let counter = statusCounters.withLockedValue { counters -> CoreMetrics.Counter in
            if let existing = counters[status] { return existing }
            let made = CoreMetrics.Counter(label: "onramp_http_requests_total", dimensions: [("status", String(status))], factory: factory)
            counters[status] = made
            return made
        }
        counter.increment()
    }

    /// Counts one request's messages of `app` (docs/ingestion.md, "Metrics"):
    /// by outcome, the rejected (quarantined) also by reason, the body's
    /// bytes, and when the app last had a message accepted.
    func messages(app: String, bytes: Int, accepted: Int, duplicates: Int, suppressed: Int, rejected: [String], at time: Double) {
        let outcomes = [("accepted", accepted), ("duplicate", duplicates), ("suppressed", suppressed), ("rejected", rejected.count)]
        for (outcome, count) in outcomes where count > 0 {
            counter("onramp_messages_total", app: app, "outcome", outcome).increment(by: count)
        }
        var reasons: [String: Int] = [:]
        for code in rejected { reasons[code, default: 0] += 1 }
        for (reason, count) in reasons { counter("onramp_quarantined_messages_total", app: app, "reason", reason).increment(by: count) }
        counter("onramp_received_bytes_total", app: app, "", "").increment(by: bytes)
        guard accepted > 0 else { return }
        let gauge = lastAccepted.withLockedValue { gauges -> CoreMetrics.Gauge in
            if let existing = gauges[app] { return existing }
            let made = CoreMetrics.Gauge(label: "onramp_last_accepted_timestamp_seconds", dimensions: [("app", app)], factory: factory)
            gauges[app] = made
            return made
        }
        gauge.record(time)
    }

    private func counter(_ label: String, app: String, _ dimension: String, _ value: String) -> CoreMetrics.Counter {
        let series = AppSeries(label: label, app: app, dimension: dimension, value: value)
        return appCounters.withLockedValue { counters in
            if let existing = counters[series] { return existing }
            let dimensions = dimension.isEmpty ? [("app", app)] : [("app", app), (dimension, value)]
            let made = CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
            counters[series] = made
            return made
        }
    }

    func updatePool(_ usage: ConnectionPool.Usage) {
        poolOpen.record(usage.open)
        poolIdle.record(usage.idle)
        poolWaiting.record(usage.waiting)
    }

    /// Prometheus text exposition format.
    func render() -> String { registry.emitToString() }
}
