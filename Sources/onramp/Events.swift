import ArgumentParser
import Foundation
import Funnels
import LibPQ
import Projection
import Reports

/// `onramp events --app NAME`: what an app sends, from the event catalogue the nightly job keeps.
struct Events: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "List an app's events: each label's counts, versions, platforms and property paths (docs/tracking-health.md).")

    @OptionGroup var database: DatabaseOptions

    @Option(help: "The app.") var app: String

    @Option(help: "Only the last this many days (default: every day the catalogue holds).")
    var days: Int?

    @Option(help: "table or json.")
    var format: String = "table"

    func validate() throws {
        guard !app.isEmpty else { throw ValidationError("--app must name an app") }
        if let days, days < 1 { throw ValidationError("--days must be at least 1 (got \(days))") }
        guard ["table", "json"].contains(format) else { throw ValidationError("--format must be table or json (got '\(format)')") }
    }

    func run() async throws {
        let from = days.map { CohortCalendar.text(ofDay: CohortCalendar.dayNumber(of: Timestamps.microseconds(Date()), in: .gmt) - Int64($0) + 1) }
        let pool = ConnectionPool(url: try database.resolvedURL(), maxConnections: 1)
        let app = app
        let counts: EventCatalogCounts
        do {
            counts = try await pool.withConnection { c in try EventCatalogRead.counts(c, app: app, from: from) }
        } catch {
            await pool.close()
            throw error
        }
        await pool.close()
        print(format == "json" ? EventCatalogText.json(app: app, counts: counts) : EventCatalogText.table(app: app, counts: counts), terminator: "")
    }
}
