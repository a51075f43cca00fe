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
    let accepted: CoreMetrics.Counter
    let duplicates: CoreMetrics.Counter
    let suppressed: CoreMetrics.Counter
    let rejected: CoreMetrics.Counter
    let commitLatency: CoreMetrics.Timer
    let groupSize: CoreMetrics.Recorder
    let poolOpen: CoreMetrics.Gauge
    let poolIdle: CoreMetrics.Gauge
    let poolWaiting: CoreMetrics.Gauge
    let queueDepth: CoreMetrics.Gauge
    private let statusCounters = NIOLockedValueBox<[Int: CoreMetrics.Counter]>([:])

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
        accepted = CoreMetrics.Counter(label: "onramp_messages_total", dimensions: [("outcome", "accepted")], factory: factory)
        duplicates = CoreMetrics.Counter(label: "onramp_messages_total", dimensions: [("outcome", "duplicate")], factory: factory)
        suppressed = CoreMetrics.Counter(label: "onramp_messages_total", dimensions: [("outcome", "suppressed")], factory: factory)
        rejected = CoreMetrics.Counter(label: "onramp_messages_total", dimensions: [("outcome", "rejected")], factory: factory)
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

    func updatePool(_ usage: ConnectionPool.Usage) {
        poolOpen.record(usage.open)
        poolIdle.record(usage.idle)
        poolWaiting.record(usage.waiting)
    }

    /// Prometheus text exposition format.
    func render() -> String { registry.emitToString() }
}
