import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs a program to completion and reports its exit, output and peak memory.
///
/// posix_spawn and wait4 rather than Foundation's Process: `pg_ctl start`
/// leaves a daemon behind that inherits descriptors, Process's wait can hang
/// from a concurrency thread, and wait4 gives the child's own peak RSS (which
/// the benchmarks report). Output goes to a temporary file.
public enum ChildProcess {
    public struct Result: Sendable {
        public var status: Int32
        public var signaled: Bool
        public var output: String
        public var maxResidentKilobytes: Int
        public var seconds: Double

        public var statusDescription: String { signaled ? "signal \(status)" : "exit \(status)" }
    }

    public static func run(_ argv: [String], environment: [String: String] = [:]) throws -> Result {
        guard let executable = argv.first else { throw LocalClusterError("no program to run") }
        let outputPath = NSTemporaryDirectory() + "onramp-cmd-\(UUID().uuidString).log"
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for arg in cArgs { free(arg) } }
        let env = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
        var cEnv: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
        defer { for entry in cEnv { free(entry) } }
        let started = ContinuousClock.now
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, &cArgs, &cEnv)
        guard spawned == 0 else {
            throw LocalClusterError("cannot run \(executable): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            guard errno == EINTR else { throw LocalClusterError("wait4 failed for \(executable)") }
        }
        let elapsed = ContinuousClock.now - started
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        let signaled = (status & 0x7f) != 0
        return Result(
            status: signaled ? status & 0x7f : (status >> 8) & 0xff, signaled: signaled, output: text,
            maxResidentKilobytes: Int(usage.ru_maxrss),
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
}
