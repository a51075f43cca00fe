import Dispatch
import NIOConcurrencyHelpers

/// Work over an archive's files on every core: each file's index or
/// read-back is its own, so they run side by side once PostgreSQL has sent
/// the month, and a month's cost is not one core's.
enum Parallel {
    /// `transform` of each item, in order; the first error is rethrown.
    static func map<Item: Sendable, Output: Sendable>(
        _ items: [Item], _ transform: @Sendable (Item) throws -> Output
    ) throws -> [Output] {
        let results = NIOLockedValueBox([Result<Output, any Error>?](repeating: nil, count: items.count))
        DispatchQueue.concurrentPerform(iterations: items.count) { index in
            let result = Result { try transform(items[index]) }
            results.withLockedValue { $0[index] = result }
        }
        return try results.withLockedValue { $0 }.map { try ($0 ?? .failure(ArchiveError.refused("a file was not processed"))).get() }
    }
}
