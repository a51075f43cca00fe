import ArgumentParser
import LibPQ

/// The `onramp` executable: one subcommand per job. It only reads options and
/// calls into the library modules, so tests exercise the same code.
@main
struct Onramp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "onramp",
        abstract: "Self-hosted onboarding analytics: ingest events, project funnels, report drop-off.",
        subcommands: [Serve.self, Migrate.self, Keys.self, Report.self, Rebuild.self, Events.self, FunnelCommand.self, ExploreCommand.self, PrivacyCommand.self, AccessCommand.self, AudiencesCommand.self, Export.self, ArchiveCommand.self, Simulate.self, Demo.self]
    )

    /// ArgumentParser's entry point, but a database error is printed whole
    /// (its message, detail and hint) for the operator at the terminal; its
    /// `description`, which logs and answers use, names only its kind.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let error as PostgresError {
            exit(withError: DatabaseFailure(description: error.debugDescription))
        } catch {
            exit(withError: error)
        }
    }
}

/// A database error as the terminal shows it.
struct DatabaseFailure: Error, CustomStringConvertible {
    let description: String
}
