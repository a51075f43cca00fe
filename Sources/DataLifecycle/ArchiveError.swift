import Foundation

/// Why an archive, a restore or a verification stopped, worded for the
/// operator: the file or month, and what to do. Nothing is dropped after one.
public enum ArchiveError: Error, CustomStringConvertible, Equatable {
    /// A file or directory could not be read or written (errno).
    case io(String, Int32)
    /// A file or manifest does not match what was written.
    case damaged(String, String)
    /// The database refused or changed under the run.
    case refused(String)

    public var description: String {
        switch self {
        case .io(let path, let code): "\(path): \(String(cString: strerror(code)))"
        case .damaged(let path, let why): "\(path) does not verify: \(why); nothing was dropped or restored"
        case .refused(let why): why
        }
    }
}
