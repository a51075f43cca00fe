/// Failures of reading the log, or of work run beside a read, that a caller
/// tells apart from the database's own errors.
package struct LogReadError: Error, CustomStringConvertible, Sendable {
    package enum Code: Sendable { case stopped, spill }
    package let code: Code
    package let description: String

    package init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}
