public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private, throwaway PostgreSQL cluster: `initdb` and `pg_ctl` in a temporary
/// directory, listening on a free loopback port. PostgreSQL refuses to run as
/// root, so when this process is root the server runs as an unprivileged user
/// (`$ONRAMP_PG_USER`, else `postgres`, else a user it creates).
public final class LocalCluster: Sendable {
    public struct Options: Sendable {
        /// Skip fsync: fine for tests, wrong for benchmarks that measure commits.
        public var durable: Bool
        public var maxConnections: Int
        public init(durable: Bool = false, maxConnections: Int = 200) {
            self.durable = durable
            self.maxConnections = maxConnections
        }
    }

    public let directory: URL
    public let port: Int
    public let superuser = "onramp"
    private let runAs: String?
    private let binDirectory: URL
    /// The server options `start` used (port, socket directory, durability), reused by `resume`.
    private let serverOptions: String

    /// URL of the cluster's `postgres` database, or another database by name.
    public func url(database: String = "postgres") -> String {
        "postgresql://\(superuser)@127.0.0.1:\(port)/\(database)"
    }

    private init(directory: URL, port: Int, runAs: String?, binDirectory: URL, serverOptions: String) {
        self.directory = directory
        self.port = port
        self.runAs = runAs
        self.binDirectory = binDirectory
        self.serverOptions = serverOptions
    }

    /// The path of one of PostgreSQL's programs (`pg_dump`), where the server's are.
    public static func program(_ name: String) throws -> String { try findBinaries().appendingPathComponent(name).path }

    /// Creates and starts a new cluster.
    public static func start(options: Options = Options()) throws -> LocalCluster {
        let bin = try findBinaries()
        let runAs = try unprivilegedUser()
        let base = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("onramp-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        let data = base.appendingPathComponent("data")
        if let runAs { try run("/bin/chown", ["-R", runAs, base.path]) }
        try run(
            bin.appendingPathComponent("initdb").path,
            ["-D", data.path, "-U", "onramp", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"],
            as: runAs)
        var lastError: (any Error)?
        for _ in 0..<5 {
            let port = try freePort()
            var settings = [
                "-p \(port)", "-k \(base.path)", "-c listen_addresses=127.0.0.1",
                "-c max_connections=\(options.maxConnections)", "-c shared_buffers=256MB",
            ]
            if !options.durable {
                settings += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
            }
            let serverOptions = settings.joined(separator: " ")
            do {
                try run(
                    bin.appendingPathComponent("pg_ctl").path,
                    ["-D", data.path, "-l", base.appendingPathComponent("server.log").path, "-o", serverOptions,
                     "-w", "-t", "60", "start"],
                    as: runAs)
                return LocalCluster(directory: base, port: port, runAs: runAs, binDirectory: bin, serverOptions: serverOptions)
            } catch {
                lastError = error  // most likely the port was taken meanwhile; try another
            }
        }
        throw lastError ?? LocalClusterError("could not start PostgreSQL")
    }

    /// Stops the server (fast shutdown) and deletes its files.
    public func stop() {
        _ = try? Self.run(
            binDirectory.appendingPathComponent("pg_ctl").path,
            ["-D", directory.appendingPathComponent("data").path, "-m", "fast", "-w", "stop"], as: runAs)
        try? FileManager.default.removeItem(at: directory)
    }

    /// Restarts the server in place (the fault suite uses this).
    public func restart(mode: String = "fast") throws {
        try Self.run(
            binDirectory.appendingPathComponent("pg_ctl").path,
            ["-D", directory.appendingPathComponent("data").path, "-m", mode, "-w", "restart"], as: runAs)
    }

    /// Stops the server, keeping its files, so it can be started again.
    public func pause() throws {
        try Self.run(
            binDirectory.appendingPathComponent("pg_ctl").path,
            ["-D", directory.appendingPathComponent("data").path, "-m", "fast", "-w", "stop"], as: runAs)
    }

    public func resume() throws {
        try Self.run(
            binDirectory.appendingPathComponent("pg_ctl").path,
            ["-D", directory.appendingPathComponent("data").path, "-l", directory.appendingPathComponent("server.log").path,
             "-o", serverOptions, "-w", "-t", "60", "start"], as: runAs)
    }

    // MARK: Helpers

    static func findBinaries() throws -> URL {
        let fm = FileManager.default
        var candidates: [URL] = []
        if let dir = ProcessInfo.processInfo.environment["ONRAMP_PG_BINDIR"] { candidates.append(URL(fileURLWithPath: dir)) }
        let versions = (try? fm.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for v in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            candidates.append(URL(fileURLWithPath: "/usr/lib/postgresql/\(v)/bin"))
        }
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            candidates.append(URL(fileURLWithPath: String(dir)))
        }
        guard let found = candidates.first(where: { fm.isExecutableFile(atPath: $0.appendingPathComponent("initdb").path) })
        else {
            throw LocalClusterError("initdb not found; install PostgreSQL (apt-get install postgresql) or set ONRAMP_PG_BINDIR")
        }
        return found
    }

    static func unprivilegedUser() throws -> String? {
        guard geteuid() == 0 else { return nil }
        let preferred = ProcessInfo.processInfo.environment["ONRAMP_PG_USER"] ?? "postgres"
        if getpwnam(preferred) != nil { return preferred }
        if getpwnam("onramp_pg") == nil {
            try run("/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "onramp_pg"])
        }
        return "onramp_pg"
    }

    /// A port nothing listens on now, on loopback (the kernel's pick).
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw LocalClusterError("socket() failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw LocalClusterError("bind() failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw LocalClusterError("getsockname() failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @discardableResult
    static func run(_ executable: String, _ arguments: [String], as user: String? = nil) throws -> String {
        let argv = user.map { ["/usr/sbin/runuser", "-u", $0, "--", executable] + arguments } ?? ([executable] + arguments)
        let result = try ChildProcess.run(argv)
        guard result.exit.status == 0 else {
            let name = (executable as NSString).lastPathComponent
            throw LocalClusterError("\(name) failed (\(result.exit.statusDescription)): \(result.output)")
        }
        return result.output
    }
}

public struct LocalClusterError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
