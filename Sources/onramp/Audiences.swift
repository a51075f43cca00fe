import ArgumentParser
import Delivery
import Foundation
import Funnels
import LibPQ
import LogReading
import Projection
import Reports

/// `onramp audiences run|list|show|export` (docs/audiences.md): keep the
/// configured audiences between nights, and read them as the last run left them.
struct AudiencesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audiences",
        abstract: "Keep the audiences up to date between nights, and read who is in them.",
        subcommands: [Run.self, List.self, Show.self, Export.self, Deliveries.self])

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run",
            abstract: "Bring the audiences (and the funnels) up to date: meant for a timer every few minutes.",
            discussion: "Exits 0 saying 'skipped' when a nightly run holds the job's lock: the next run catches up.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var configuration: ConfigurationOptions
        @OptionGroup var metrics: MetricsFileOptions

        func run() async throws {
            try await metrics.recording(job: "audiences_run") { try await keep() }
        }

        /// Keeps the audiences and sends what is due; returns what it did, for `--metrics-file`.
        private func keep() async throws -> [JobMetricsText.Value] {
            let configured = try configuration.load()
            // A delivery without its secret stops the run before anything is written.
            let deliverer = try Deliverer.checked(configured)
            let job = ProjectionJob(configuration: configured, showProgress: false)
            let url = try database.resolvedURL()
            let (summary, sent) = try await ConnectionPool.using(url: url) { pool -> (ProjectionJob.AudienceRunSummary?, Deliverer.Summary) in
                var summary: ProjectionJob.AudienceRunSummary?
                do {
                    summary = try await pool.withConnection { try job.runAudiences($0) }
                } catch let error as ProjectionError where error.code == .busy {
                    summary = nil
                }
                // What is due goes out either way: a night holding the lock queued its changes too.
                return (summary, try await deliverer.run(pool))
            }
            if let summary {
                let read = summary.job.map { job in
                    "\(job.newEvents) new events, \(job.personsRecomputed + job.groupsRecomputed) persons and groups evaluated"
                } ?? "nothing new since the last run"
                print("audiences: \(summary.entered) entered, \(summary.left) left (\(read))")
            } else {
                print("skipped: another run holds the job's lock; the next run catches up")
            }
            if !deliverer.audiences.isEmpty {
                print(sent.line)
            }
            var values = [
                JobMetricsText.Value("skipped", "Whether the run gave way to another holding the job's lock (1).", summary == nil ? 1 : 0),
                JobMetricsText.Value("audiences_entered", "Audience entries the run recorded.", summary?.entered ?? 0),
                JobMetricsText.Value("audiences_left", "Audience exits the run recorded.", summary?.left ?? 0),
                JobMetricsText.Value("new_events", "Events the run took in since the last run.", summary?.job?.newEvents ?? 0),
                JobMetricsText.Value(
                    "persons_recomputed", "Persons and groups the run recomputed.", (summary?.job).map { $0.personsRecomputed + $0.groupsRecomputed } ?? 0),
            ]
            if !deliverer.audiences.isEmpty { values += JobMetricsText.Value.deliveries(sent) }
            return values
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "The audiences as the last run left them.")
        @OptionGroup var database: DatabaseOptions
        @Flag(help: "Print them as JSON.") var json = false

        func run() async throws {
            let audiences = try await AudiencesCommand.reading(database) { try StoredAudiences.list($0) }
            if json {
                print(try AudiencesCommand.json(audiences.map { a in
                    ["audience": a.audience, "app": a.app, "unit": a.unit, "members": a.members, "definition": a.definition,
                     "built_at": AudiencesCommand.instant(a.builtAt)] as [String: Any]
                }))
                return
            }
            guard !audiences.isEmpty else {
                print("no audiences: the last run kept none (add audiences: to the configuration, then run onramp audiences run)")
                return
            }
            for a in audiences { print("\(a.audience)\t\(a.members) \(a.unit)s\t\(a.definition)") }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "One audience: its definition, members, last changes and days.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The audience.") var name: String
        @Flag(help: "Print it as JSON.") var json = false

        func run() async throws {
            let name = self.name
            let (audience, changes, days, logFrom) = try await AudiencesCommand.reading(database) { c in
                let audience = try AudiencesCommand.find(name, in: try StoredAudiences.list(c))
                return (audience, try StoredAudiences.changes(c, audience: name, limit: 20), try StoredAudiences.days(c, audience: name, limit: 14),
                        try ArchivedMonths.logFrom(c, app: audience.app))
            }
            if json {
                print(try AudiencesCommand.json([
                    "audience": audience.audience, "app": audience.app, "unit": audience.unit, "definition": audience.definition,
                    "members": audience.members, "built_at": AudiencesCommand.instant(audience.builtAt),
                    "changes": changes.map { ["id": $0.id, "change": $0.change, "at": AudiencesCommand.instant($0.at)] },
                    "days": days.map { ["day": $0.day, "entered": $0.entered, "left": $0.left, "members": $0.members] },
                    "log_from": logFrom as Any,
                ] as [String: Any]))
                return
            }
            print("\(audience.audience): \(audience.definition)")
            let log = logFrom.map { "the log's events received since \($0) (earlier months are archived)" } ?? "the whole log"
            print("\(audience.members) \(audience.unit)s now; computed from \(log) at \(AudiencesCommand.instant(audience.builtAt))")
            if !days.isEmpty {
                print("\nday\tentered\tleft\tmembers")
                for day in days { print("\(day.day)\t\(day.entered)\t\(day.left)\t\(day.members)") }
            }
            if !changes.isEmpty {
                print("\nlatest changes")
                for change in changes { print("\(AudiencesCommand.instant(change.at))\t\(change.change)\t\(change.id)") }
            }
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export", abstract: "Every member of one audience, the latest to enter first.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The audience.") var name: String
        @Option(help: "csv (a person_id or group_id column, and entered_at) or json.") var format = "csv"

        func validate() throws {
            guard ["csv", "json"].contains(format) else { throw ValidationError("--format must be csv or json (got '\(format)')") }
        }

        func run() async throws {
            let (name, format) = (self.name, self.format)
            try await AudiencesCommand.reading(database) { c in
                let audience = try AudiencesCommand.find(name, in: try StoredAudiences.list(c))
                let column = audience.unit == "group" ? "group_id" : "person_id"
                let out = FileHandle.standardOutput
                out.write(Data((format == "csv" ? "\(column),entered_at\n" : "[").utf8))
                var first = true
                try StoredAudiences.forEachMember(c, audience: name) { member in
                    let line: String
                    if format == "csv" {
                        line = "\(Formatting.csvField(member.id)),\(AudiencesCommand.instant(member.enteredAt))\n"
                    } else {
                        line = (first ? "\n" : ",\n") + (try AudiencesCommand.json([column: member.id, "entered_at": AudiencesCommand.instant(member.enteredAt)]))
                    }
                    first = false
                    out.write(Data(line.utf8))
                }
                if format == "json" { out.write(Data((first ? "]\n" : "\n]\n").utf8)) }
            }
        }
    }

    struct Deliveries: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "deliveries", abstract: "The delivery ledger: pending, delivered and dead-lettered changes per audience.")
        @OptionGroup var database: DatabaseOptions
        @Flag(help: "List the dead-lettered changes, with their last error.") var failed = false
        @Flag(help: "Queue the dead-lettered changes again, due now.") var retry = false

        func run() async throws {
            let (failed, retry) = (self.failed, self.retry)
            let (counts, dead, retried) = try await AudiencesCommand.reading(database) { c in
                let retried = retry ? try DeliveryLedger.retryDead(c, now: Timestamps.microseconds(Date())) : 0
                return (try DeliveryLedger.counts(c), failed ? try DeliveryLedger.dead(c, limit: 1000).map { "\($0.audience)\t\($0.entry.id)\t\($0.entry.change)\t\($0.entry.unit)\t\($0.entry.attempts)\t\($0.error ?? "")" } : [], retried)
            }
            if retry { print("queued again: \(retried) dead-lettered changes") }
            if counts.isEmpty { print("the ledger is empty: no audience delivers, or nothing changed yet") }
            for count in counts {
                print("\(count.audience)\t\(count.state)\t\(count.count)" + (count.state != "delivered" ? count.lastError.map { "\t\($0)" } ?? "" : ""))
            }
            if failed {
                print("\naudience\tdelivery_id\tchange\tid\tattempts\tlast_error")
                for line in dead { print(line) }
            }
        }
    }

    /// Runs `body` on a connection to the database.
    static func reading<T: Sendable>(_ database: DatabaseOptions, _ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await ConnectionPool.using(url: try database.resolvedURL()) { pool in try await pool.withConnection(body) }
    }

    static func find(_ name: String, in audiences: [StoredAudiences.Summary]) throws -> StoredAudiences.Summary {
        guard let audience = audiences.first(where: { $0.audience == name }) else {
            let known = audiences.map(\.audience)
            throw ValidationError("no audience '\(name)' (the last run kept \(known.isEmpty ? "none" : known.joined(separator: ", ")))")
        }
        return audience
    }

    static func json(_ value: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
    }

    /// `2026-11-21T10:00:01Z`, to the second.
    static func instant(_ microseconds: Int64) -> String {
        Date(timeIntervalSince1970: Double(microseconds / 1_000_000)).ISO8601Format()
    }
}
