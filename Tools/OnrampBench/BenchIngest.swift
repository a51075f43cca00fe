import ArgumentParser
import Benchmarks
import Foundation
import IngestServer

/// `onramp-bench ingest`: the ingestion server against raw COPY, in the same run.
struct BenchIngest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ingest",
        abstract: "Drive the server over HTTP/1.1 keep-alive and compare with raw COPY into the same tables.")

    @Option(name: .customLong("batch"), help: "Messages per request (B).")
    var batchSize = 100

    @Option(help: "Concurrent clients, each on its own keep-alive connection (N).")
    var clients = 64

    @Flag(help: "Sweep B ∈ {1, 10, 100, 500} × N ∈ {1, 16, 64} instead of one case.")
    var sweep = false

    @Option(help: "Measured seconds per case (and for the raw COPY limit).")
    var duration: Double = 10

    @Option(name: .customLong("warm-up"), help: "Warm-up seconds per case, not measured.")
    var warmUp: Double = 2

    @Option(name: .customLong("copy-chunk"), help: "Rows per raw COPY transaction.")
    var copyChunk = 5_000

    @Option(name: .customLong("pool-size"), help: "The server's database connections.")
    var poolSize = 8

    @Option(help: "The server's concurrent group-commit writers.")
    var writers = 2

    @Option(help: "Persons erased and suppressed before the run (each with 20 erased message ids), so every append checks its ids (docs/privacy.md).")
    var erasedPersons = 0

    @OptionGroup var options: BenchOptions

    func validate() throws {
        guard batchSize >= 1, batchSize <= 1_000 else { throw ValidationError("--batch must be 1…1000") }
        guard clients >= 1, clients <= 512 else { throw ValidationError("--clients must be 1…512") }
        do { try IngestConfiguration.checkPool(writers: writers, poolSize: poolSize) } catch { throw ValidationError(error.description) }
        guard duration > 0, warmUp >= 0 else { throw ValidationError("--duration must be > 0 and --warm-up ≥ 0") }
    }

    func run() async throws {
        let cases: [IngestBenchmark.Case] =
            sweep
            ? [1, 10, 100, 500].flatMap { b in [1, 16, 64].map { IngestBenchmark.Case(batchSize: b, clients: $0) } }
            : [IngestBenchmark.Case(batchSize: batchSize, clients: clients)]
        let bench = IngestBenchmark(
            cases: cases, duration: .milliseconds(Int(duration * 1_000)), warmUp: .milliseconds(Int(warmUp * 1_000)),
            copyChunkSize: copyChunk, serverURL: options.serverURL, migrations: try options.migrationsDirectory(), poolSize: poolSize,
            writers: writers, erasedPersons: erasedPersons, log: { info($0) })
        let r = try await bench.run()
        if try options.printedJSON(r) { return }
        print("database: \(r.database); average message \(Int(r.averageMessageBytes)) bytes; \(r.writers) group-commit writer(s)")
        for c in r.copyRuns {
            print(
                String(
                    format: "raw COPY (%d-row transactions, events + event_ids): %.0f messages/s, %.1f MB/s, PostgreSQL %.2f cores",
                    c.chunkSize, c.messagesPerSecond, c.messagesPerSecond * r.averageMessageBytes / 1_048_576, c.postgresCores))
        }
        print("")
        print("    B    N      msg/s    MB/s   p50 ms   p99 ms   max ms  req/commit  msg/commit  commit ms  cpu bench  cpu pg  ÷ COPY")
        for c in r.cases {
            let row = String(
                format: "%5d %4d %10.0f %7.2f %8.1f %8.1f %8.1f %11.1f %11.0f %10.1f %10.2f %7.2f %7.2f",
                c.batchSize, c.clients, c.messagesPerSecond, c.megabytesPerSecond, c.latencyP50Ms, c.latencyP99Ms, c.latencyMaxMs,
                c.requestsPerCommit, c.messagesPerCommit, c.commitMeanMs, c.benchProcessCores, c.postgresCores, c.ratioToCopy)
            print(row + (c.failures > 0 ? "  (\(c.failures) failed requests)" : ""))
        }
        print("(cpu in cores: bench = this process, server and load generator together; pg = every postgres process)")
    }
}
