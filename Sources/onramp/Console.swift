import Foundation

/// Human-facing messages go to stderr, so stdout carries only a command's
/// result (a key, a report) and can be piped.
enum Console {
    static func info(_ message: String) {
        FileHandle.standardError.write(Data((message + "\n").utf8))
    }
}
