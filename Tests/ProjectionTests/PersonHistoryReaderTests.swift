import Foundation
import Funnels
import LibPQ
import LocalPostgres
import LogReading
@testable import Projection
import TestSupport
import Testing

/// The history reader spills the log into partition files by person; however
/// finely it splits, every person must still arrive whole, exactly once.
@Suite("person history through spill files")
struct PersonHistoryReaderTests {
    static let configuration = bundledConfiguration

    static func spillDirectories() throws -> Set<String> {
        Set(try FileManager.default.contentsOfDirectory(atPath: FileManager.default.temporaryDirectory.path)
            .filter { $0.hasPrefix("onramp-history-") })
    }

    @Test("each person arrives once with all their events, over many partitions written to disk, and the files are removed")
    func personsArriveWhole() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let events = EventSeeder.journeys(configuration: Self.configuration, personsPerFunnel: 120, seed: 21)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        let app = "ops"
        let before = try Self.spillDirectories()
        let (seen, expected, linkedAnonymousEvents, partitionSizes, sawDisk) = try await pool.withConnection {
            c -> ([String: Int], [Row], Int, [Int], Bool) in
            var seen: [String: Int] = [:]
            var expected: [Row] = []
            var linkedAnonymousEvents = 0
            var partitionSizes: [Int] = []
            var sawDisk = false
            var directory: URL?
            try c.transaction(isolation: .repeatableRead) { c in
                let links = try IdentityLinker.rebuild(reading: c, writing: c, app: app)
                // The reader gives anonymous events their person itself; PostgreSQL's join is the reference.
                expected = try c.query(
                    """
                    SELECT COALESCE(l.person_id, e.user_id, e.anonymous_id), count(*) FROM events e
                    LEFT JOIN identity_links l ON l.app = e.app AND l.anonymous_id = COALESCE(e.user_id, e.anonymous_id)
                    WHERE e.app = $1 GROUP BY 1
                    """, [.text(app)]
                ).rows
                linkedAnonymousEvents = try c.query(
                    """
                    SELECT count(*) FROM events e JOIN identity_links l ON l.app = e.app AND l.anonymous_id = e.anonymous_id
                    WHERE e.app = $1 AND e.user_id IS NULL
                    """, [.text(app)]
                ).scalar(Int.self)
                let reader = PersonHistoryReader(app: app, paths: ["context.os.name", "properties.step"])
                let history = try reader.spill(c, scope: .all(.init(owners: links)), partitions: 7, spillBuffer: 2048)
                defer { history.remove() }
                directory = history.directory
                let created = try Self.spillDirectories().subtracting(before)
                sawDisk = history.partitions.contains { $0.file != nil } && created.contains(history.directory.lastPathComponent)
                for partition in history.partitions {
                    partitionSizes.append(
                        try reader.forEachPerson(in: partition) { person, timeline in
                            #expect(seen[person] == nil, "\(person) handed over twice")
                            seen[person] = timeline.count
                            #expect(timeline.allSatisfy { !$0.messageId.isEmpty && $0.timestamp > 0 })
                        })
                }
            }
            // Its own directory is gone; other suites' jobs may spill meanwhile.
            #expect(directory.map { !FileManager.default.fileExists(atPath: $0.path) } == true, "the spill directory was left behind")
            return (seen, expected, linkedAnonymousEvents, partitionSizes, sawDisk)
        }
        #expect(partitionSizes.count == 7)
        #expect(partitionSizes.filter { $0 > 0 }.count >= 5)
        #expect(sawDisk, "the 2 KB buffers never reached a file")
        #expect(expected.count > 100)
        #expect(linkedAnonymousEvents > 0, "no anonymous event belongs to a user: the links went untested")
        for row in expected {
            #expect(seen[try row.decode(String.self, at: 0)] == (try row.decode(Int.self, at: 1)))
        }
        #expect(seen.count == expected.count)
        await pool.close()
        try await db.drop()
    }

    @Test("ids with bytes COPY escapes (tab, backslash, newline, control bytes) still bring a person's anonymous and identified events together, and a group's members' events, in a rebuild's read and an incremental run's")
    func escapedIdsStayOnePerson() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let device = "dev\tice\\1\u{08}\u{0C}"
        let user = "us\ner\\\u{0B}\r\t7"
        let company = "co\t\\1\u{1F}"
        let unit = HistoryUnit.unit(of: company)
        let start: Int64 = 1_800_000_000_000_000
        let events = [
            SeedEvent(app: "ops", type: "screen", event: "Welcome", anonymousId: device, timestamp: start),
            SeedEvent(app: "ops", event: "signed_up", anonymousId: device, userId: user, timestamp: start + 1_000_000),
            SeedEvent(app: "ops", event: "tutorial_done", anonymousId: device, timestamp: start + 2_000_000),
            SeedEvent(app: "ops", event: "signed_up", userId: user, timestamp: start + 3_000_000),
            SeedEvent(app: "ops", type: "screen", event: "Welcome", anonymousId: "other\\device", timestamp: start),
            SeedEvent(app: "ops", type: "group", anonymousId: device, timestamp: start + 4_000_000, groupId: company),
            SeedEvent(app: "ops", type: "group", anonymousId: "other\\device", timestamp: start + 5_000_000, groupId: company),
        ]
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        let reader = PersonHistoryReader(app: "ops", paths: [], countsGroups: true)
        @Sendable func timelines(_ history: SpilledHistory) throws -> [String: Int] {
            defer { history.remove() }
            var seen: [String: Int] = [:]
            for partition in history.partitions {
                _ = try reader.forEachPerson(in: partition) { person, timeline in
                    #expect(seen[person] == nil, "\(person.debugDescription) split over partitions")
                    seen[person] = timeline.count
                }
            }
            return seen
        }
        let rebuilt = try await pool.withConnection { c in
            try c.transaction(isolation: .repeatableRead) { c in
                let links = try IdentityLinker.rebuild(reading: c, writing: c, app: "ops")
                #expect(links[device] == user)
                let groups = try GroupMembership.all(c, app: "ops", persons: links)
                #expect(groups == [user: [unit], "other\\device": [unit]])
                return try timelines(try reader.spill(c, scope: .all(.init(owners: links, groups: groups)), partitions: 13, spillBuffer: 64))
            }
        }
        #expect(rebuilt == [user: 5, "other\\device": 2, unit: 7])
        // As an incremental run reads them: keys and persons worked out on the
        // run's session, the events read on a second one.
        let touched = try await pool.withConnection { c in
            try c.transaction(isolation: .repeatableRead) { c in
                let reads = try SnapshotReader.open(beside: c)
                #expect(reads !== c)  // the links are the ones stored above
                var day = NewEvents()
                day.users = [.init(app: "ops", id: user)]
                day.anonymous = [.init(app: "ops", id: device), .init(app: "ops", id: "other\\device")]
                let collected = try TouchedPersons.collect(
                    c, day: day, relinks: [], groupFunnels: [CompanyLog.funnel],
                    lookup: try .init(c, windows: [:], activityDays: [], activitySpan: nil, scanShare: 1, dialect: .postgres),
                    reader: reads, prefetched: nil)
                #expect(collected.touched == ["ops": [user, "other\\device", unit]])
                #expect(collected.identities["ops"]?.owners == [device: user])
                #expect(collected.identities["ops"]?.groups == [user: [unit], "other\\device": [unit]])
                return try timelines(try reader.spill(reads, scope: .touched(collected.identities["ops"] ?? .init()), partitions: 5, spillBuffer: 64))
            }
        }
        #expect(touched == rebuilt)
        await pool.close()
        try await db.drop()
    }

    @Test("the job split into tiny partitions and key-by-key lookups, or with lookups by scan, or reading on its one session, or with one worker, gives the same tables, for a rebuild and the incremental run after it")
    func partitioningDoesNotChangeResults() async throws {
        let events = EventSeeder.journeys(configuration: Self.configuration, personsPerFunnel: 150, seed: 8)
        let half = events.count / 2
        var fine = ProjectionJob(configuration: Self.configuration, showProgress: false)
        fine.options.eventsPerPartition = 90
        fine.options.spillBuffer = 1024
        fine.options.lookupScanShare = .infinity
        var scanned = fine
        scanned.options.lookupScanShare = 0
        var oneSession = fine
        oneSession.options.secondSession = false
        var oneWorker = fine
        oneWorker.options.workers = 1
        let whole = ProjectionJob(configuration: Self.configuration, showProgress: false)
        var dumps: [[String: [String]]] = []
        for job in [whole, fine, oneSession, scanned, oneWorker] {
            let db = try await TestDatabase.create()
            let pool = db.pool(maxConnections: 1)
            try await pool.withConnection { c in try EventSeeder.insert(c, Array(events.prefix(half))) }
            _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild, now: 1_900_000_000_000_000) }
            try await pool.withConnection { c in try EventSeeder.insert(c, Array(events.dropFirst(half))) }
            let summary = try await pool.withConnection { c in try job.run(c, mode: .incremental, now: 1_900_000_000_000_000) }
            #expect(summary.newEvents == events.count - half)
            dumps.append(try await pool.withConnection { try TableDump.dump($0) })
            await pool.close()
            try await db.drop()
        }
        #expect((dumps[0]["funnel_persons"]?.count ?? 0) > 500)
        for table in TableDump.queries.keys.sorted() {
            #expect(dumps[1][table] == dumps[0][table], "\(table)")
            #expect(dumps[2][table] == dumps[0][table], "\(table), one session")
            #expect(dumps[3][table] == dumps[0][table], "\(table), lookups by scan")
            #expect(dumps[4][table] == dumps[0][table], "\(table), one worker")
        }
    }

    @Test("spill directories of a killed job are removed by the next run; a running job's and unrelated ones are not")
    func abandonedSpillIsRemoved() throws {
        let parent = FileManager.default.temporaryDirectory.appendingPathComponent("spill-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: parent) }
        let finished = Process()
        finished.executableURL = URL(fileURLWithPath: "/bin/true")
        try finished.run()
        finished.waitUntilExit()
        let gone = "\(SpilledHistory.prefix)\(finished.processIdentifier)-a"
        let alive = "\(SpilledHistory.prefix)\(getpid())-b"
        let unrelated = "onramp-something-else"
        for name in [gone, alive, unrelated] {
            try FileManager.default.createDirectory(at: parent.appendingPathComponent(name), withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: parent.appendingPathComponent(name).appendingPathComponent("0").path, contents: Data("x\n".utf8)))
        }
        SpilledHistory.removeAbandoned(in: parent)
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: parent.path)) == [alive, unrelated])
    }
}
