public import Foundation

/// One `sql/migrations/NNN_name.sql` file.
public struct MigrationFile: Sendable, Hashable {
    public let version: Int
    public let name: String
    public let fileName: String
    public let sql: String

    /// Reads every `NNN_name.sql` in `directory`, ordered by version. Two files
    /// with one version, or a stray `.sql` name, is an error: order must be certain.
    public static func load(from directory: URL) throws -> [MigrationFile] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        var files: [MigrationFile] = []
        for fileName in names where fileName.hasSuffix(".sql") {
            let stem = fileName.dropLast(4)
            let parts = stem.split(separator: "_", maxSplits: 1)
            guard parts.count == 2, parts[0].count == 3, let version = Int(parts[0]) else {
                throw MigrationError("migration file '\(fileName)' is not named NNN_name.sql")
            }
            let sql = try String(contentsOf: directory.appendingPathComponent(fileName), encoding: .utf8)
            files.append(MigrationFile(version: version, name: String(parts[1]), fileName: fileName, sql: sql))
        }
        files.sort { $0.version < $1.version }
        for (a, b) in zip(files, files.dropFirst()) where a.version == b.version {
            throw MigrationError("migrations '\(a.fileName)' and '\(b.fileName)' share version \(a.version)")
        }
        return files
    }

    /// Where the migrations are. The binary does not embed them: SwiftPM resources
    /// must live inside a target, and the SQL belongs under `sql/` where analysts
    /// and reviewers read it. Search order: `explicit` (`--migrations`),
    /// `$ONRAMP_MIGRATIONS_DIR`, `./sql/migrations`, then `sql/migrations` or
    /// `share/onramp/sql/migrations` above the executable (a `swift build` tree or
    /// an install prefix).
    public static func locateDirectory(explicit: String? = nil) throws -> URL {
        let fm = FileManager.default
        var candidates: [URL] = []
        if let explicit { candidates.append(URL(fileURLWithPath: explicit)) }
        if let env = ProcessInfo.processInfo.environment["ONRAMP_MIGRATIONS_DIR"], !env.isEmpty {
            candidates.append(URL(fileURLWithPath: env))
        }
        candidates.append(URL(fileURLWithPath: fm.currentDirectoryPath).appendingPathComponent("sql/migrations"))
        var dir = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").resolvingSymlinksInPath()
            .deletingLastPathComponent()
        for _ in 0..<6 {
            candidates.append(dir.appendingPathComponent("sql/migrations"))
            candidates.append(dir.appendingPathComponent("share/onramp/sql/migrations"))
            dir = dir.deletingLastPathComponent()
        }
        if explicit != nil, let first = candidates.first {
            guard isDirectory(first) else { throw MigrationError("migrations directory '\(first.path)' does not exist") }
            return first
        }
        guard let found = candidates.first(where: isDirectory) else {
            throw MigrationError("cannot find sql/migrations; pass --migrations DIR or set ONRAMP_MIGRATIONS_DIR")
        }
        return found
    }

    private static func isDirectory(_ url: URL) -> Bool {
        var isDir: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &isDir) && isDir.boolValue
    }
}

public struct MigrationError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
