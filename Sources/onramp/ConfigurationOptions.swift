import ArgumentParser
import Foundation
import Funnels

/// `--config FILE` (default `$ONRAMP_CONFIG`, else the bundled five funnels).
struct ConfigurationOptions: ParsableArguments {
    @Option(help: "Funnel configuration YAML (default: $ONRAMP_CONFIG, else the bundled default).")
    var config: String?

    func load() throws -> FunnelConfiguration {
        let path = config ?? ProcessInfo.processInfo.environment["ONRAMP_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        guard let path else { return try FunnelConfiguration.default() }
        return try FunnelConfiguration.load(contentsOf: URL(fileURLWithPath: path))
    }
}
