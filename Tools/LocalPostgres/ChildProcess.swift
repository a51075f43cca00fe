import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs a program and reports its exit, output and peak memory.
///
/// posix_spawn and wait4 rather than Foundation's Process: `pg_ctl start`
/// leaves a daemon behind that inherits descriptors, Process's wait can hang
/// from a concurrency thread (it waits for every holder of a descriptor the
/// child inherited, so a helper the child leaves running keeps a finished
/// child "running"), and wait4 gives the child's own peak RSS (which the
/// benchmarks report). Output goes to files.
public enum ChildProcess {
    public struct Exit: Sendable {
        public var status: Int32
        public var signaled: Bool
        public var maxResidentKilobytes: Int
        public var seconds: Double

        public var statusDescription: String { signaled ? "signal \(status)" : "exit \(status)" }
    }

    public struct Result: Sendable {
        public var exit: Exit
        public var output: String
    }

    /// A started child. With `ownGroup` it leads a process group of its own,
    /// so `stopGroup` also stops the helpers it started and left behind.
    public struct Started: Sendable {
        let pid: pid_t
        let executable: String
        let started: ContinuousClock.Instant
        let ownGroup: Bool

        /// Whether the child has exited, leaving it unreaped (its pid, and so
        /// its group's, cannot be reused until `wait`); never waits.
        public func hasExited() throws -> Bool {
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 {
                guard errno == EINTR else { throw LocalClusterError("waitid failed for \(executable)") }
            }
            return info._sifields._sigchld.si_pid == pid
        }

        /// Waits for the child to exit and reaps it.
        public func wait() throws -> Exit {
            var status: Int32 = 0
            var usage = rusage()
            while wait4(pid, &status, 0, &usage) != pid {
                guard errno == EINTR else { throw LocalClusterError("wait4 failed for \(executable)") }
            }
            let elapsed = ContinuousClock.now - started
            let signaled = (status & 0x7f) != 0
            return Exit(
                status: signaled ? status & 0x7f : (status >> 8) & 0xff, signaled: signaled,
                maxResidentKilobytes: Int(usage.ru_maxrss),
                seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }

        /// SIGKILL to every process still in the child's own group, before
        /// the child is reaped (`ownGroup` only; otherwise nothing).
        public func stopGroup() {
            if ownGroup { _ = kill(-pid, SIGKILL) }
        }
    }

    /// Starts `argv` with standard input from /dev/null, standard output to
    /// `outputPath` and standard error to `errorPath` (or the output's file).
    public static func start(
        _ argv: [String], environment: [String: String] = [:], outputPath: String, errorPath: String? = nil, ownGroup: Bool = false
    ) throws -> Started {
        guard let executable = argv.first else { throw LocalClusterError("no program to run") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        if let errorPath {
            posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        if ownGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        }
        var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for arg in cArgs { free(arg) } }
        let env = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
        var cEnv: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
        defer { for entry in cEnv { free(entry) } }
        let started = ContinuousClock.now
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, &cArgs, &cEnv)
        guard spawned == 0 else {
            throw LocalClusterError("cannot run \(executable): \(String(cString: strerror(spawned)))")
        }
        return Started(pid: pid, executable: executable, started: started, ownGroup: ownGroup)
    }

    /// Runs `argv` to completion, its standard output and error together.
    public static func run(_ argv: [String], environment: [String: String] = [:]) throws -> Result {
        let outputPath = NSTemporaryDirectory() + "onramp-cmd-\(UUID().uuidString).log"
        defer { unlink(outputPath) }
        let exit = try start(argv, environment: environment, outputPath: outputPath).wait()
        return Result(exit: exit, output: (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "")
    }
}
