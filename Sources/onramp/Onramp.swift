import ArgumentParser

/// The `onramp` executable: one subcommand per job. It only reads options and
/// calls into the library modules, so tests exercise the same code.
@main
struct Onramp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "onramp",
        abstract: "Self-hosted onboarding analytics: ingest events, project funnels, report drop-off.",
        subcommands: [Serve.self, Migrate.self, Keys.self, Report.self, Rebuild.self, FunnelCommand.self, ExploreCommand.self, Simulate.self, Demo.self]
    )
}
