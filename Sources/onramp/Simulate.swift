import ArgumentParser
import Foundation
import Simulation

/// `onramp simulate`: a week of realistic onboarding traffic for the five
/// flows, sent through the client SDK over HTTP to a running server.
struct Simulate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Send simulated onboarding traffic to a running `onramp serve`.")

    @Option(help: "The server's base URL.")
    var server: String = "http://127.0.0.1:8080"

    @Option(name: .customLong("key"), help: "app=WRITE_KEY (repeatable), e.g. --key yoked=ork_…")
    var keys: [String] = []

    @Option(help: "A file of app=WRITE_KEY lines (as `scripts/demo` writes).")
    var keysFile: String?

    @Option(help: "Simulated devices.")
    var devices: Int = 1000

    @Option(help: "Days of history, ending now.")
    var days: Int = 7

    @Option(help: "Random seed: the same seed gives the same journeys.")
    var seed: UInt64 = 1

    @Option(help: "Devices sending at once.")
    var concurrency: Int = 16

    @OptionGroup var planted: PlantOptions

    func run() async throws {
        guard let host = URL(string: server), host.scheme != nil else {
            throw ValidationError("--server must be a URL such as http://127.0.0.1:8080 (got '\(server)')")
        }
        var map: [String: String] = [:]
        var lines = keys
        if let keysFile {
            lines += try String(contentsOfFile: keysFile, encoding: .utf8).split(separator: "\n").map(String.init)
        }
        for line in lines where !line.trimmingCharacters(in: .whitespaces).isEmpty {
            let parts = line.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { throw ValidationError("a key must be given as app=WRITE_KEY (got '\(line)')") }
            map[String(parts[0]).trimmingCharacters(in: .whitespaces)] = String(parts[1]).trimmingCharacters(in: .whitespaces)
        }
        var options = Simulator.Options(host: host, keys: map)
        options.devices = devices
        options.days = days
        options.seed = seed
        options.concurrency = concurrency
        options.plants = try planted.plants()
        options.progress = { done, total in Console.info("simulate: \(done)/\(total) devices") }
        let summary = try await Simulator.run(options)
        Console.info(
            "simulated \(summary.devices) devices: \(summary.messages) messages, \(summary.delivered) delivered, "
                + "\(summary.rejected) rejected, \(summary.stillQueued) still queued; "
                + "\(summary.offlineDevices) offline devices delivered late, \(summary.skewedDevices) with a skewed clock, "
                + "\(summary.resentForDuplicates) messages re-sent as duplicates")
        for (app, count) in summary.messagesPerApp.sorted(by: { $0.key < $1.key }) {
            Console.info("  \(app): \(count) messages")
        }
        if summary.stillQueued > 0 { throw ExitCode(4) }
    }
}
