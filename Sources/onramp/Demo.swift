import ArgumentParser
import EventLog
import Foundation
import IngestServer
import LibPQ
import LocalPostgres
import Logging
import Migrations
import Projection
import Reports
import ServiceLifecycle
import Simulation

/// `onramp demo`: the whole pipeline in one command. Uses `--database-url` /
/// `$DATABASE_URL` when given, else starts a private PostgreSQL it stops at the
/// end; migrates, creates write keys, serves, simulates a week of traffic
/// through the client SDK over HTTP, runs the nightly report and prints it.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the whole pipeline on simulated traffic and print the report.")

    @Option(name: .customLong("database-url"), help: "An existing database (default: $DATABASE_URL, else a private throwaway PostgreSQL).")
    var databaseURL: String?

    @Option(help: "Simulated devices.")
    var devices: Int = 1500

    @Option(help: "Days of simulated history.")
    var days: Int = 7

    @Option(help: "Random seed (default: from the clock, so a second run adds new devices).")
    var seed: UInt64?

    @OptionGroup var planted: PlantOptions

    @Option(help: "Directory for the report files and the HTML dashboard.")
    var out: String = "onramp-demo"

    @OptionGroup var funnels: ConfigurationOptions

    func run() async throws {
        let given = databaseURL ?? ProcessInfo.processInfo.environment["DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
        var cluster: LocalCluster?
        let url: String
        if let given {
            url = given
        } else {
            Console.info("demo: starting a private PostgreSQL …")
            let started = try LocalCluster.start(options: .init(durable: true))
            cluster = started
            let admin = ConnectionPool(url: started.url(), maxConnections: 1)
            try await admin.query("CREATE DATABASE onramp")
            await admin.close()
            url = started.url(database: "onramp")
            Console.info("demo: PostgreSQL at \(url) (data in \(started.directory.path))")
        }
        defer {
            if let cluster {
                Console.info("demo: stopping the private PostgreSQL")
                cluster.stop()
            }
        }
        let outcome = await Result(catching: { try await pipeline(databaseURL: url) })
        try outcome.get()
    }

    private func pipeline(databaseURL url: String) async throws {
        let migrations = try MigrationFile.locateDirectory()
        let pool = ConnectionPool(url: url, maxConnections: 2)
        let migrator = try Migrator(directory: migrations)
        let applied = try await pool.withConnection { try migrator.migrate($0) }
        Console.info("demo: migrated (\(applied.applied.count) applied, \(applied.alreadyApplied.count) already there)")
        let store = WriteKeyStore(pool: pool)
        var keys: [String: String] = [:]
        for app in ["yoked", "ops", "umuve", "forma"] { keys[app] = try await store.create(app: app) }
        await pool.close()
        Console.info("demo: created write keys for yoked, ops, umuve, forma")

        var logger = Logger(label: "onramp.demo")
        logger.logLevel = .warning
        var configuration = IngestConfiguration(databaseURL: url)
        configuration.port = 0
        configuration.logger = logger
        configuration.migrationsDirectory = migrations
        configuration.policy = IngestPolicy(funnels: try funnels.load())
        configuration.rateLimitPerSecond = 100_000
        configuration.rateLimitBurst = 100_000
        let (ports, sink) = AsyncStream.makeStream(of: Int.self)
        configuration.onServerRunning = { port in
            sink.yield(port)
            sink.finish()
        }
        let app = try await buildApplication(configuration: configuration)
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        let devices = self.devices, days = self.days
        let seed = self.seed ?? UInt64(Date().timeIntervalSince1970)
        let plants = try planted.plants()
        let summary: Simulator.Summary = try await withThrowingTaskGroup(of: Simulator.Summary?.self) { tasks in
            tasks.addTask {
                try await group.run()
                return nil
            }
            var port = 0
            for await p in ports { port = p }
            Console.info("demo: serving on http://127.0.0.1:\(port); simulating \(devices) devices over \(days) days (seed \(seed)) …")
            var options = Simulator.Options(host: URL(string: "http://127.0.0.1:\(port)")!, keys: keys)
            options.devices = devices
            options.days = days
            options.seed = seed
            options.plants = plants
            options.progress = { done, total in Console.info("demo: \(done)/\(total) devices sent") }
            let result = await Result(catching: { try await Simulator.run(options) })
            await group.triggerGracefulShutdown()
            var summary: Simulator.Summary?
            while let next = try await tasks.next() { if let next { summary = next } }
            _ = summary
            return try result.get()
        }
        Console.info(
            "demo: \(summary.messages) messages sent by \(summary.devices) devices; \(summary.delivered) delivered, "
                + "\(summary.rejected) rejected, \(summary.resentForDuplicates) re-sent as duplicates, "
                + "\(summary.skewedDevices) devices with a skewed clock, \(summary.offlineDevices) delivered late")
        Console.info("demo: running the nightly report …")
        let job = ProjectionJob(configuration: try funnels.load(), showProgress: false)
        let run = try await NightlyRun.run(job, mode: .incremental, query: ReportQuery(), databaseURL: url)
        let writer = ReportWriter(directory: URL(fileURLWithPath: out))
        let written = try writer.write(run, from: nil, to: nil)
        print(written.text, terminator: "")
        for line in written.regressions { Console.info("demo: regression: \(line)") }
        for line in written.instrumentation { Console.info("demo: instrumentation: \(line)") }
        let index = URL(fileURLWithPath: out).appendingPathComponent("index.html").standardizedFileURL.path
        Console.info("demo: wrote \(written.files.count) report files; the HTML dashboard is at \(index)")
    }
}
