import NIOConcurrencyHelpers

/// A token bucket per write key: `rate` requests a second, bursts of `burst`.
/// In-process only; behind a load balancer each instance limits on its own.
final class RateLimiter: Sendable {
    struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    let rate: Double
    let burst: Double
    // A pthread lock: ThreadSanitizer cannot see Synchronization.Mutex on Linux and reports false races.
    private let buckets = NIOLockedValueBox<[String: Bucket]>([:])

    init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = max(1, burst)
    }

    /// nil when the request may go ahead, else seconds until a token is free.
    func acquire(_ key: String, now: ContinuousClock.Instant = .now) -> Int? {
        buckets.withLockedValue { buckets in
            if buckets.count > 100_000 { buckets.removeAll() }
            var bucket = buckets[key] ?? Bucket(tokens: burst, updated: now)
            let elapsed = now - bucket.updated
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            bucket.tokens = min(burst, bucket.tokens + seconds * rate)
            bucket.updated = now
            defer { buckets[key] = bucket }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            return max(1, Int(((1 - bucket.tokens) / rate).rounded(.up)))
        }
    }
}
