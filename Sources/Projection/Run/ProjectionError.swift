/// Failures of the nightly job a scheduler should tell apart.
public struct ProjectionError: Error, CustomStringConvertible, Sendable {
    public enum Code: Sendable { case busy, badConfiguration, spill, unwritable, stopped }
    public let code: Code
    public let description: String

    static let busy = ProjectionError(
        code: .busy,
        description: "another `onramp report` or `onramp rebuild` is running on this database; this run exits without writing")

    /// An outcome a `funnel_persons` row cannot hold.
    static func unwritable(funnel: String, person: String, _ reason: String) -> ProjectionError {
        ProjectionError(code: .unwritable, description: "cannot store the outcome of person \(person) in funnel \(funnel): \(reason)")
    }
}
