import ArgumentParser
import Benchmarks
import Foundation

/// `onramp-bench fault-client`: the load and the ledger check of `scripts/faults`.
struct FaultClient: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fault-client", abstract: "Load with a ledger of acknowledgements, and its check (scripts/faults).",
        subcommands: [Load.self, Verify.self, Hostile.self])

    struct Load: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Send batches, retrying as the SDK does, until --stop-file appears.")

        @Option(help: "Server base URL, e.g. http://127.0.0.1:18080.") var url: String
        @Option(name: .customLong("key"), help: "app=writeKey; repeat for several apps.") var keys: [String]
        @Option(help: "Concurrent clients.") var clients = 32
        @Option(name: .customLong("batch"), help: "Messages per request.") var batchSize = 20
        @Option(name: .customLong("id-prefix"), help: "Prefix of every messageId of this run.") var idPrefix: String
        @Option(help: "Directory for the sent/acked ledgers.") var ledger: String
        @Option(name: .customLong("stop-file"), help: "Stop once this file exists.") var stopFile: String?
        @Option(name: .customLong("max-seconds"), help: "Stop after this long regardless.") var maxSeconds: Double = 600
        @Option(name: .customLong("drain-seconds"), help: "How long to keep retrying the last batches after stopping.")
        var drainSeconds: Double = 60

        func run() async throws {
            let pairs = try keys.map { item -> (app: String, key: String) in
                let parts = item.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { throw ValidationError("--key must be app=writeKey") }
                return (String(parts[0]), String(parts[1]))
            }
            let load = FaultLoad(
                url: url, keys: pairs, clients: clients, batchSize: batchSize, idPrefix: idPrefix,
                ledgerDirectory: URL(fileURLWithPath: ledger), stopFile: stopFile.map { URL(fileURLWithPath: $0) },
                maxDuration: .milliseconds(Int(maxSeconds * 1_000)), drainTimeout: .milliseconds(Int(drainSeconds * 1_000)))
            let summary = try await load.run()
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(summary), as: UTF8.self))
        }
    }

    struct Hostile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Traffic that is not a well-behaved SDK, for a bounded time: unknown-keys, garbage or slow.")

        @Option(help: "Server base URL.") var url: String
        @Option(help: "unknown-keys, garbage or slow.") var kind: String
        @Option(help: "Concurrent requests, or slow connections.") var concurrency = 64
        @Option(help: "How long.") var seconds: Double = 10
        @Option(help: "The write key garbage is sent with (none: unauthenticated).") var key: String?

        func run() async throws {
            guard let kind = HostileLoad.Kind(rawValue: kind) else {
                throw ValidationError("--kind must be one of \(HostileLoad.Kind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            let load = HostileLoad(url: url, kind: kind, concurrency: concurrency, duration: .milliseconds(Int(seconds * 1_000)), key: key)
            let summary = try await load.run()
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(summary), as: UTF8.self))
        }
    }

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Compare the ledgers with the event log; exit 1 on any loss or duplicate.")

        @Option(name: .customLong("database-url")) var databaseURL: String
        @Option(help: "Directory of the ledgers.") var ledger: String
        @Option(name: .customLong("id-prefix")) var idPrefix: String

        func run() async throws {
            let report = try await FaultVerify.run(
                databaseURL: databaseURL, ledgerDirectory: URL(fileURLWithPath: ledger), idPrefix: idPrefix)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
            if !report.ok { throw ExitCode(1) }
        }
    }
}
