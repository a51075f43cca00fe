import Crypto
import EventLog
import Foundation
import Funnels
import LibPQ
import LocalPostgres
import Privacy
import Projection
import TestSupport
import Testing

@Suite("erasing a person, against a real PostgreSQL")
struct ErasureTests {
    static let configuration = try! FunnelConfiguration.default()
    static let day: Int64 = 86_400_000_000

    func job() -> ProjectionJob { ProjectionJob(configuration: Self.configuration, showProgress: false) }

    /// One person of `funnel`'s app through every required step, on two
    /// devices: the first anonymous until an identify (with traits), the
    /// second signed in; every message carries `marker` in its properties,
    /// context or traits. Then a third device they share with another user,
    /// who signs in on it later.
    static func plantedPerson(_ funnel: Funnel, user: String, devices: [String], shared: String, other: String, marker: String, at start: Int64) -> [NewEvent] {
        let context = #"{"os": {"name": "iOS"}, "app": {"version": "2.3.0"}, "note": "\#(marker)-context"}"#
        func event(_ id: String, _ type: MessageType, _ name: String?, anonymous: String?, user: String?, at t: Int64, traits: String? = nil) -> NewEvent {
            NewEvent(
                app: funnel.app, type: type, messageID: id, event: name, anonymousID: anonymous, userID: user, timestamp: t,
                originalTimestamp: t, sentAt: nil, receivedAt: Timestamps.microseconds(Date()),
                properties: #"{"hint": "\#(marker)-properties"}"#, context: context, traits: traits)
        }
        var events: [NewEvent] = []
        var t = start
        let required = funnel.requiredStepIndices.compactMap { funnel.steps[$0].matchers.first }
        for (position, matcher) in required.enumerated() {
            t += 60_000_000
            let signedIn = position >= required.count / 2
            if position == required.count / 2 {
                events.append(event("\(marker)-identify", .identify, nil, anonymous: devices[0], user: user, at: t - 1_000_000,
                                    traits: #"{"email": "\#(marker)@example.com"}"#))
            }
            events.append(event(
                "\(marker)-step-\(position)", matcher.kind == .screen ? .screen : .track, matcher.name,
                anonymous: signedIn && position % 2 == 0 ? devices[1] : devices[0], user: signedIn ? user : nil, at: t))
        }
        events.append(event("\(marker)-shared-1", .track, "help_opened", anonymous: shared, user: nil, at: start + 10_000_000))
        events.append(event("\(marker)-shared-2", .identify, nil, anonymous: shared, user: user, at: start + 20_000_000))
        var later = event("\(other)-on-shared", .track, "help_opened", anonymous: shared, user: other, at: start + Self.day)
        later.properties = "{}"
        later.context = "{}"
        events.append(later)
        return events
    }

    /// Every table as it is, against what a rebuild of the log writes, table by table.
    static func expectEqualToRebuild(
        _ pool: ConnectionPool, _ job: ProjectionJob, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let now = try await pool.withConnection { try TableDump.dump($0) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .rebuild) }
        let rebuilt = try await pool.withConnection { try TableDump.dump($0) }
        #expect(Set(now.keys) == Set(rebuilt.keys), sourceLocation: sourceLocation)
        for table in rebuilt.keys.sorted() {
            #expect(now[table] == rebuilt[table], "\(table) differs from a rebuild", sourceLocation: sourceLocation)
        }
    }

    static func pgDump(_ url: String) throws -> String {
        let result = try ChildProcess.run([try LocalCluster.program("pg_dump"), "--no-owner", "--dbname", url])
        guard result.exit.status == 0, !result.exit.signaled else {
            throw PostgresError(.unexpectedResult, message: "pg_dump failed: \(result.output)")
        }
        return result.output
    }

    @Test("an erased person is gone from every table and from pg_dump; the tables equal a rebuild; re-sent and later messages are not stored")
    func erasePerson() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = self.job()
        let funnel = Self.configuration.funnels[0]
        let marker = "zq7marker"
        let user = "erase-me-user", devices = ["erase-me-device-1", "erase-me-device-2"], shared = "erase-me-shared", other = "keep-me-user"
        let seeded = EventSeeder.journeys(configuration: Self.configuration, personsPerFunnel: 80, seed: 11)
        try await pool.withConnection { c in try EventSeeder.insert(c, seeded) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        let start = (Timestamps.microseconds(Date()) / Self.day - 3) * Self.day + 3_600_000_000
        let planted = Self.plantedPerson(funnel, user: user, devices: devices, shared: shared, other: other, marker: marker, at: start)
        let rejected = QuarantineEntry(
            app: funnel.app, receivedAt: Timestamps.microseconds(Date()),
            rejection: Rejection(index: 0, messageID: "\(marker)-bad", code: "invalid_timestamp", message: "no",
                                 raw: #"{"properties":{"hint":"\#(marker)-quarantine"},"timestamp":"yesterday","type":"track","userId":"\#(user)"}"#))
        // They were renamed once, by an alias the new user id sent from another device, which then went on: one person.
        var renamed = planted[planted.count - 2]
        renamed.messageID = "\(marker)-alias"
        renamed.type = .alias
        renamed.event = nil
        renamed.anonymousID = "renamed-device"
        renamed.userID = "renamed-user"
        renamed.previousID = user
        var afterwards = planted[0]
        afterwards.messageID = "renamed-goes-on"
        afterwards.anonymousID = "renamed-device"
        afterwards.userID = nil
        afterwards.properties = "{}"
        afterwards.context = "{}"
        afterwards.timestamp = renamed.timestamp + 1_000_000
        let history = planted + [renamed, afterwards]
        _ = try await pool.withConnection { c in try EventStore.append(history, quarantine: [rejected], on: c) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        let before = try await pool.query(
            "SELECT count(*) FROM funnel_persons WHERE person_id IN ($1, 'renamed-user')", [.text(user)]).scalar(Int.self)
        #expect(before >= 1)
        #expect(try Self.pgDump(db.url).contains(marker))

        let result = try await Erasure(app: funnel.app, userIds: [user], anonymousIds: [], requestedBy: "ticket-42", suppress: true)
            .run(job, databaseURL: db.url)
        #expect(Set(result.users) == [user, "renamed-user"])
        #expect(Set(result.devices) == Set(devices + [shared, "renamed-device"]))
        #expect(result.sharedDevices == [shared])
        // Theirs, less the other user's on the shared device; the alias, and the renamed person's event.
        #expect(result.removed["events"] == planted.count + 1)
        #expect(result.removed["event_ids"] == planted.count + 1)
        #expect(result.removed["quarantine"] == 1)
        #expect(result.removed["funnel_persons"] == before)

        // Every table as a rebuild of the log without them finds it.
        #expect(try await pool.query("SELECT count(*) FROM privacy_pending").scalar(Int.self) == 0)
        try await Self.expectEqualToRebuild(pool, job)

        // Nothing of them in the whole database, but the shared device in the other user's event.
        let dump = try Self.pgDump(db.url)
        for text in [marker, user, devices[0], devices[1]] { #expect(!dump.contains(text), "pg_dump still holds \(text)") }
        #expect(try await pool.query("SELECT user_id FROM events WHERE anonymous_id = $1", [.text(shared)]).rows.map { try $0.decode(String.self, at: 0) } == [other])
        #expect(try await pool.query("SELECT user_id FROM identity_links WHERE anonymous_id = $1", [.text(shared)]).scalar(String.self) == other)

        // A re-sent message is a duplicate; a later one carrying their ids is suppressed; the other user's is stored.
        var resent = planted[0]
        resent.anonymousID = "a-device-never-seen"
        resent.userID = nil
        var fromUser = planted[1]
        fromUser.messageID = "a-new-message"
        fromUser.anonymousID = "another-device-never-seen"
        fromUser.userID = user
        var fromDevice = planted[0]
        fromDevice.messageID = "a-new-message-2"
        var fromOther = planted.last!
        fromOther.messageID = "a-new-message-3"
        var alias = planted[1]
        alias.messageID = "a-new-alias"
        alias.type = .alias
        alias.event = nil
        alias.anonymousID = nil
        alias.userID = "a-new-name"
        alias.previousID = user
        let later = [resent, fromUser, fromDevice, fromOther, alias]
        let badAgain = QuarantineEntry(
            app: funnel.app, receivedAt: Timestamps.microseconds(Date()),
            rejection: Rejection(index: 0, messageID: "\(marker)-bad-2", code: "invalid_timestamp", message: "no",
                                 raw: #"{"anonymousId":"\#(devices[1])","timestamp":"tomorrow","type":"track"}"#, anonymousID: devices[1]))
        let outcomes = try await pool.withConnection { c in try EventStore.append(later, quarantine: [badAgain], on: c) }
        #expect(outcomes == [.duplicate, .suppressed, .suppressed, .stored, .suppressed])
        #expect(try await pool.query("SELECT count(*) FROM quarantine").scalar(Int.self) == 0)
        #expect(try await pool.query("SELECT count(*) FROM events WHERE message_id LIKE $1", [.text("\(marker)%")]).scalar(Int.self) == 0)

        // The audit trail has no personal data: the ids as keyed hashes only.
        let audit = try await PrivacyRequests.list(db.url)
        #expect(audit.count == 1)
        #expect(audit.first?.requestedBy == "ticket-42")
        #expect(audit.first?.ids == 1)
        #expect(audit.first?.completedAt != nil)
        #expect(audit.first?.removed["funnel_persons"] == before)

        // Unsuppressed, the user is stored again.
        let lifted = try await PrivacyRequests.unsuppress(db.url, app: funnel.app, userIds: [user], anonymousIds: [], requestedBy: "ticket-43")
        #expect(lifted.lifted == 1)
        fromUser.messageID = "a-new-message-4"
        let again = fromUser
        #expect(try await pool.withConnection { c in try EventStore.append([again], quarantine: [], on: c) } == [.stored])
        await pool.close()
        try await db.drop()
    }

    @Test("an anonymous id erases the whole person it belongs to; a device that never signed in, itself alone")
    func eraseByAnonymousId() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = self.job()
        let funnel = Self.configuration.funnels[0]
        let start = (Timestamps.microseconds(Date()) / Self.day - 2) * Self.day
        let planted = Self.plantedPerson(funnel, user: "u-1", devices: ["d-1", "d-2"], shared: "d-3", other: "u-2", marker: "m1", at: start)
        let lonely = Self.plantedPerson(funnel, user: "u-9", devices: ["d-9", "d-10"], shared: "d-11", other: "u-10", marker: "m9", at: start)
            .filter { $0.userID == nil && $0.anonymousID == "d-9" }
        _ = try await pool.withConnection { c in try EventStore.append(planted + lonely, quarantine: [], on: c) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }

        let person = try await Erasure(app: funnel.app, userIds: [], anonymousIds: ["d-2"], requestedBy: "t", suppress: false).run(job, databaseURL: db.url)
        #expect(person.users == ["u-1"])
        #expect(Set(person.devices) == ["d-1", "d-2", "d-3"])
        let device = try await Erasure(app: funnel.app, userIds: [], anonymousIds: ["d-9"], requestedBy: "t", suppress: false).run(job, databaseURL: db.url)
        #expect(device.users == [])
        #expect(device.devices == ["d-9"])
        #expect(device.removed["events"] == lonely.count)
        let left = try await pool.query("SELECT coalesce(user_id, anonymous_id) FROM events").rows.map { try $0.decode(String.self, at: 0) }
        #expect(left == ["u-2"])
        try await Self.expectEqualToRebuild(pool, job)
        await pool.close()
        try await db.drop()
    }

    @Test("a person who keeps posting while erased with --suppress: nothing of theirs is left, and once suppressed they stay out")
    func eraseWhileAppending() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let writers = ConnectionPool(url: try db.url(as: "onramp_writer"), maxConnections: 2)
        let job = self.job()
        let funnel = Self.configuration.funnels[0]
        let start = (Timestamps.microseconds(Date()) / Self.day - 1) * Self.day
        let planted = Self.plantedPerson(funnel, user: "racer", devices: ["r-1", "r-2"], shared: "r-3", other: "bystander", marker: "race", at: start)
        _ = try await pool.withConnection { c in try EventStore.append(planted, quarantine: [], on: c) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        // Two writers post the person's messages, one at a time each, until
        // each has had one stored before the erasure and one suppressed after.
        let seen = Outcomes()
        let appenders = (0..<2).map { lane in
            Task { () throws -> Void in
                var n = 0
                while !Task.isCancelled {
                    n += 1
                    var event = planted[1]
                    event.messageID = "race-\(lane)-\(n)"
                    event.userID = "racer"
                    event.timestamp = Timestamps.microseconds(Date())
                    let sent = event
                    let outcome: [AppendOutcome]
                    do {
                        outcome = try await writers.withConnection { c in try EventStore.append([sent], quarantine: [], on: c) }
                    } catch {
                        if Task.isCancelled { return }  // told to stop while waiting for a connection
                        throw error
                    }
                    await seen.add(outcome[0], lane: lane)
                }
            }
        }
        func waitFor(_ outcome: AppendOutcome) async throws {
            for _ in 0..<600 where !(await seen.bothHad(outcome)) { try await Task.sleep(for: .milliseconds(100)) }
            #expect(await seen.bothHad(outcome), "a writer never had \(outcome)")
        }
        try await waitFor(.stored)
        _ = try await Erasure(app: funnel.app, userIds: ["racer"], anonymousIds: [], requestedBy: "t", suppress: true).run(job, databaseURL: db.url)
        try await waitFor(.suppressed)
        for appender in appenders { appender.cancel() }
        for appender in appenders { try await appender.value }
        for lane in 0..<2 {
            let outcomes = await seen.lanes[lane] ?? []
            if let first = outcomes.firstIndex(of: .suppressed) { #expect(!outcomes[first...].contains(.stored), "stored again after suppressed") }
        }
        #expect(try await pool.query("SELECT count(*) FROM events WHERE user_id = 'racer' OR anonymous_id IN ('r-1', 'r-2')").scalar(Int.self) == 0)
        await writers.close()
        await pool.close()
        try await db.drop()
    }

    @Test("an erasure waits for a nightly run that holds the job's lock, then erases")
    func waitsForTheNight() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let night = db.pool(maxConnections: 1)
        let job = self.job()
        let funnel = Self.configuration.funnels[0]
        let start = (Timestamps.microseconds(Date()) / Self.day - 2) * Self.day
        let planted = Self.plantedPerson(funnel, user: "late", devices: ["l-1", "l-2"], shared: "l-3", other: "early", marker: "wait", at: start)
        _ = try await pool.withConnection { c in try EventStore.append(planted, quarantine: [], on: c) }
        // A stand-in for a long night: a session holding the job's lock.
        try await night.withConnection { c in _ = try c.query("SELECT pg_advisory_lock($1)", [.int(ProjectionJob.lockKey)]) }
        let erasure = Task {
            try await Erasure(app: funnel.app, userIds: ["late"], anonymousIds: [], requestedBy: "t", suppress: false).run(job, databaseURL: db.url)
        }
        try await Task.sleep(for: .seconds(2))
        #expect(try await pool.query("SELECT count(*) FROM events WHERE user_id = 'late'").scalar(Int.self) > 0, "it did not wait")
        try await night.withConnection { c in _ = try c.query("SELECT pg_advisory_unlock($1)", [.int(ProjectionJob.lockKey)]) }
        let result = try await erasure.value
        #expect(result.users == ["late"])
        #expect(try await pool.query("SELECT count(*) FROM events WHERE user_id = 'late'").scalar(Int.self) == 0)
        await night.close()
        await pool.close()
        try await db.drop()
    }

    @Test("a device whose stored link is out of date: its other user is recomputed too, and the tables equal a rebuild")
    func staleLink() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = self.job()
        let funnel = Self.configuration.funnels[0]
        let start = (Timestamps.microseconds(Date()) / Self.day - 2) * Self.day
        // The device's journey, signed in as v: stored linked to v.
        let journey = Self.plantedPerson(funnel, user: "v", devices: ["d", "d-v"], shared: "d-x", other: "w", marker: "stale", at: start)
        _ = try await pool.withConnection { c in try EventStore.append(journey, quarantine: [], on: c) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        #expect(try await pool.query("SELECT user_id FROM identity_links WHERE anonymous_id = 'd'").scalar(String.self) == "v")
        // Not yet projected: the device seen with u before it ever was with v. By the events, d is u's.
        let earlier = NewEvent(
            app: funnel.app, type: .identify, messageID: "u-on-d", event: nil, anonymousID: "d", userID: "u", timestamp: start - Self.day,
            originalTimestamp: nil, sentAt: nil, receivedAt: Timestamps.microseconds(Date()), properties: "{}", context: "{}", traits: nil)
        _ = try await pool.withConnection { c in try EventStore.append([earlier], quarantine: [], on: c) }
        let erased = try await Erasure(app: funnel.app, userIds: ["u"], anonymousIds: [], requestedBy: "t", suppress: false).run(job, databaseURL: db.url)
        #expect(erased.devices == ["d"])
        #expect(erased.sharedDevices == ["d"])
        try await Self.expectEqualToRebuild(pool, job)
        await pool.close()
        try await db.drop()
    }

    @Test("an erasure follows aliases: a server-side sign-in's device and a renamed account go with the person; the tables equal a rebuild")
    func eraseThroughAliases() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = self.job()
        let funnel = Self.configuration.funnels[0]
        let start = (Timestamps.microseconds(Date()) / Self.day - 2) * Self.day
        // u-old's journey; then a server-side alias names a device that never sent u-old, and the account is renamed.
        var planted = Self.plantedPerson(funnel, user: "u-old", devices: ["d-1", "d-2"], shared: "d-3", other: "w", marker: "al", at: start)
        func message(_ id: String, _ type: MessageType, anonymous: String?, user: String?, previous: String?, at t: Int64) -> NewEvent {
            var event = NewEvent(
                app: funnel.app, type: type, messageID: id, event: type == .track ? "help_opened" : nil, anonymousID: anonymous, userID: user,
                timestamp: t, originalTimestamp: t, sentAt: nil, receivedAt: Timestamps.microseconds(Date()), properties: "{}", context: "{}",
                traits: nil)
            event.previousID = previous
            return event
        }
        planted += [
            message("al-device", .track, anonymous: "d-server", user: nil, previous: nil, at: start + 1_000_000),
            message("al-alias-device", .alias, anonymous: nil, user: "u-old", previous: "d-server", at: start + 2_000_000),
            message("al-rename", .alias, anonymous: nil, user: "u-new", previous: "u-old", at: start + Self.day),
            message("al-renamed", .track, anonymous: nil, user: "u-new", previous: nil, at: start + Self.day + 1_000_000),
            // Someone else, untouched.
            message("other", .track, anonymous: "d-other", user: "x", previous: nil, at: start + 3_000_000),
        ]
        let messages = planted
        _ = try await pool.withConnection { c in try EventStore.append(messages, quarantine: [], on: c) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        #expect(try await pool.query(
            "SELECT DISTINCT person_id FROM analytics.events WHERE user_id IN ('u-old', 'u-new') OR anonymous_id IN ('d-1', 'd-server')"
        ).rows.map { try $0.decode(String.self, at: 0) } == ["u-new"])

        let erased = try await Erasure(app: funnel.app, userIds: ["u-new"], anonymousIds: [], requestedBy: "t", suppress: true).run(job, databaseURL: db.url)
        #expect(Set(erased.users) == ["u-new", "u-old"])
        #expect(Set(erased.devices) == ["d-1", "d-2", "d-3", "d-server"])
        let left = try await pool.query("SELECT message_id FROM events ORDER BY message_id").rows.map { try $0.decode(String.self, at: 0) }
        #expect(left == ["other", "w-on-shared"])
        #expect(try await pool.query("SELECT count(*) FROM identity_links WHERE person_id IN ('u-new', 'u-old')").scalar(Int.self) == 0)
        try await Self.expectEqualToRebuild(pool, job)
        await pool.close()
        try await db.drop()
    }

    @Test("links that led through an erased person lead on as a rebuild finds them: a shared device's, and an id linked to it")
    func linksThroughAnErasedPerson() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        let job = self.job()
        let funnel = Self.configuration.funnels[0]
        let start = (Timestamps.microseconds(Date()) / Self.day - 2) * Self.day
        func message(_ id: String, anonymous: String?, user: String?, at t: Int64) -> NewEvent {
            NewEvent(
                app: funnel.app, type: .track, messageID: id, event: "help_opened", anonymousID: anonymous, userID: user, timestamp: t,
                originalTimestamp: t, sentAt: nil, receivedAt: Timestamps.microseconds(Date()), properties: "{}", context: "{}", traits: nil)
        }
        // r is first u's, later v's; k, an id sent once as r's device, leads through r; v was renamed to w.
        let messages = [
            message("r-u", anonymous: "r", user: "u", at: start),
            message("k-r", anonymous: "k", user: "r", at: start + 1_000_000),
            message("k-alone", anonymous: "k", user: nil, at: start + 2_000_000),
            message("r-v", anonymous: "r", user: "v", at: start + 3_000_000),
            message("r-alone", anonymous: "r", user: nil, at: start + 4_000_000),
        ]
        var rename = message("v-w", anonymous: nil, user: "w", at: start + 5_000_000)
        rename.type = .alias
        rename.event = nil
        rename.previousID = "v"
        let all = messages + [rename]
        _ = try await pool.withConnection { c in try EventStore.append(all, quarantine: [], on: c) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        #expect(try await pool.query("SELECT person_id FROM identity_links WHERE anonymous_id = 'k'").scalar(String.self) == "u")

        _ = try await Erasure(app: funnel.app, userIds: ["u"], anonymousIds: [], requestedBy: "t", suppress: false).run(job, databaseURL: db.url)
        let links = try await pool.query("SELECT anonymous_id || '>' || person_id FROM identity_links ORDER BY anonymous_id").rows
            .map { try $0.decode(String.self, at: 0) }
        #expect(links == ["r>w", "v>w"])
        try await Self.expectEqualToRebuild(pool, job)
        await pool.close()
        try await db.drop()
    }

    @Test("only the privacy function deletes from the log; the server's and the analyst's roles cannot erase; the hash is HMAC-SHA256")
    func rolesAndHash() async throws {
        let db = try await TestDatabase.create()
        let owner = db.pool(maxConnections: 1)
        let writer = ConnectionPool(url: try db.url(as: "onramp_writer"), maxConnections: 1)
        let analyst = ConnectionPool(url: try db.url(as: "onramp_analyst"), maxConnections: 1)
        let event = NewEvent(
            app: "yoked", type: .track, messageID: "m", event: "otp_verified", anonymousID: "d", userID: "u", timestamp: 1_000_000,
            originalTimestamp: nil, sentAt: nil, receivedAt: Timestamps.microseconds(Date()), properties: "{}", context: "{}", traits: nil)
        // The server's role appends, partitions included.
        #expect(try await writer.withConnection { c in try EventStore.append([event], quarantine: [], on: c) } == [.stored])
        _ = try await writer.withConnection { c in try EventStore.ensurePartitions(on: c) }
        for (pool, sql) in [
            (writer, "DELETE FROM events"), (writer, "SELECT properties FROM events"), (writer, "SELECT * FROM privacy_key"), (writer, "SELECT * FROM suppressed_ids"),
            (writer, "SELECT onramp_keyed_hash('yoked', 'user', 'u')"), (writer, "SELECT onramp_ensure_event_partitions(0, 1000)"),
            (analyst, "SELECT * FROM public.privacy_key"),
            (writer, "SELECT * FROM onramp_privacy_erase('yoked', ARRAY['u'], ARRAY[]::text[], 'x', false)"),
            (analyst, "SELECT * FROM public.onramp_privacy_erase('yoked', ARRAY['u'], ARRAY[]::text[], 'x', false)"),
            (owner, "DELETE FROM events"), (owner, "UPDATE events SET event = 'x'"), (owner, "TRUNCATE events"), (owner, "DELETE FROM event_ids"),
        ] {
            await #expect(throws: PostgresError.self, "\(sql) was allowed") { try await pool.query(sql) }
        }
        #expect(try await owner.query("SELECT count(*) FROM events").scalar(Int.self) == 1)

        // The keyed hash, against swift-crypto's HMAC with the stored key.
        let pad = try await owner.query("SELECT inner_pad FROM privacy_key").first!.decode(PostgresBytes.self, at: 0).bytes
        let key = SymmetricKey(data: pad.prefix(32).map { $0 ^ 0x36 })
        let ours = try await owner.query("SELECT onramp_keyed_hash('yoked', 'user', 'ü-1')").first!.decode(PostgresBytes.self, at: 0).bytes
        let theirs = Array(HMAC<SHA256>.authenticationCode(for: Array("yoked\0user\0ü-1".utf8), using: key))
        #expect(ours == theirs)
        await writer.close()
        await analyst.close()
        await owner.close()
        try await db.drop()
    }
}

/// What each writer of the race test was answered, in order.
actor Outcomes {
    var lanes: [Int: [AppendOutcome]] = [:]

    func add(_ outcome: AppendOutcome, lane: Int) { lanes[lane, default: []].append(outcome) }

    func bothHad(_ outcome: AppendOutcome) -> Bool { (0..<2).allSatisfy { lanes[$0]?.contains(outcome) ?? false } }
}

extension ErasureTests {
    @Test("an erased member leaves their groups: a company's funnel counting groups is recomputed without them, and the tables equal a rebuild")
    func eraseGroupMember() async throws {
        let db = try await TestDatabase.create()
        let pool = db.pool(maxConnections: 1)
        var configuration = Self.configuration
        configuration.funnels.append(CompanyLog.funnel)
        let job = ProjectionJob(configuration: configuration, showProgress: false)
        let events = CompanyLog.events(seed: 4)
        try await pool.withConnection { c in try EventSeeder.insert(c, events) }
        _ = try await pool.withConnection { c in try job.run(c, mode: .incremental) }
        func stored() async throws -> [String: Int] {
            var levels: [String: Int] = [:]
            for row in try await pool.query("SELECT group_id, level FROM analytics.funnel_persons WHERE funnel = 'companies'").rows {
                levels[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1)
            }
            return levels
        }
        // A company its creator set up and joined, which an employee completed.
        let before = try await stored()
        let company = try #require(try await pool.query(
            """
            SELECT group_id FROM analytics.group_members
            WHERE app = 'ops' AND person_id = 'creator-' || substr(group_id, 4) AND group_id = ANY($1::text[])
            ORDER BY group_id LIMIT 1
            """, [.textArray(before.filter { $0.value == 2 }.keys.sorted())]
        ).rows.first).decode(String.self, at: 0)
        let creator = "creator-" + company.dropFirst(3)

        _ = try await Erasure(app: "ops", userIds: [creator], anonymousIds: [], requestedBy: "t", suppress: false).run(job, databaseURL: db.url)
        let after = try await stored()
        #expect(after[company] != 2, "the company's setup went with its creator")
        #expect(after == (try await pool.withConnection { c in try CompanyLog.referenceLevels(c) }).filter { $0.value >= 1 })
        try await Self.expectEqualToRebuild(pool, job)
        await pool.close()
        try await db.drop()
    }
}
