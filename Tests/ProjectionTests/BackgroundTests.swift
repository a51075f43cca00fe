import Foundation
import LogReading
import NIOConcurrencyHelpers
@testable import Projection
import Testing

/// The nightly job's one way of running work beside itself.
@Suite struct BackgroundTests {
    struct Planted: Error, Equatable {}

    @Test("one thread runs its tasks in the order given; each Pending returns its task's value or rethrows its error")
    func inOrder() throws {
        let lane = Background(threads: 1)
        defer { lane.shutdown() }
        let seen = NIOLockedValueBox<[Int]>([])
        let tasks = (0..<50).map { n in
            lane.run { () throws -> Int in
                seen.withLockedValue { $0.append(n) }
                if n == 7 { throw Planted() }
                return n * n
            }
        }
        for (n, task) in tasks.enumerated() where n != 7 { #expect(try task.wait() == n * n) }
        #expect(throws: Planted.self) { try tasks[7].wait() }
        #expect(seen.withLockedValue { $0 } == Array(0..<50))
    }

    @Test("several threads share the tasks; shut down, a task not yet begun fails as stopped, and one under way finishes")
    func sharedAndStopped() throws {
        let lane = Background(threads: 2)
        let sums = (0..<8).map { n in lane.run { (0...100_000).reduce(0) { $0 &+ $1 &* n } } }
        for (n, sum) in sums.enumerated() { #expect(try sum.wait() == (0...100_000).reduce(0) { $0 &+ $1 &* n }) }
        let single = Background(threads: 1)
        let running = single.run { () -> Int in
            Thread.sleep(forTimeInterval: 0.2)
            return 1
        }
        let queued = single.run { 2 }
        Thread.sleep(forTimeInterval: 0.05)
        single.shutdown()
        lane.shutdown()
        #expect(try running.wait() == 1)
        do {
            _ = try queued.wait()
            Issue.record("a task queued behind a shutdown ran")
        } catch let error as LogReadError {
            #expect(error.code == .stopped)
        }
    }
}
