/// Failures of the nightly job a scheduler should tell apart.
public struct ProjectionError: Error, CustomStringConvertible, Sendable {
    public enum Code: Sendable { case busy, badConfiguration, corruptTally, spill }
    public let code: Code
    public let description: String

    static let busy = ProjectionError(
        code: .busy,
        description: "another `onramp report` or `onramp rebuild` is running on this database; this run exits without writing")
}
