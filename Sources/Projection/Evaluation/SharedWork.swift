import NIOConcurrencyHelpers

/// Items `0..<count` of uneven size, each taken once by whichever thread
/// asks next, with each one's result: handed out in turn, one thread could
/// be left with the large ones while the other idles. The active persons'
/// lookups share their chunks this way (`PersonActivity.Prefetch`), the
/// report its funnels (`ReportQuery`).
final class SharedWork<Value: Sendable>: Sendable {
    private let count: Int
    /// The next item to take, and each item's result (nil: not taken, or not done).
    private let state: NIOLockedValueBox<(next: Int, results: [Result<Value, any Error>?])>

    init(count: Int) {
        self.count = count
        state = NIOLockedValueBox((next: 0, results: Array(repeating: nil, count: count)))
    }

    /// Does items on the calling thread until none is left or one of them failed.
    func work(_ body: (Int) throws -> Value) {
        while let index = state.withLockedValue({ s -> Int? in
            guard s.next < count else { return nil }
            defer { s.next += 1 }
            return s.next
        }) {
            let result = Result { try body(index) }
            state.withLockedValue { $0.results[index] = result }
            if case .failure = result { return }
        }
    }

    /// Leaves the items not taken yet.
    func stop() {
        state.withLockedValue { $0.next = count }
    }

    /// Each item's result, in order; nil for those not taken or not done.
    var results: [Result<Value, any Error>?] { state.withLockedValue { $0.results } }
}
