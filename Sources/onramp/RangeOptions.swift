import ArgumentParser
import Foundation
import Funnels

/// What `funnel` and `report` (and `rebuild`) share: the cohort days
/// reported, the zone they are cut in and the output's format. Each
/// command checks the format against those it renders.
struct RangeOptions: ParsableArguments {
    @Option(help: "First cohort day, YYYY-MM-DD (inclusive; default: all).")
    var from: String?

    @Option(help: "Last cohort day, YYYY-MM-DD (inclusive; default: all).")
    var to: String?

    @Option(
        name: .customLong("time-zone"),
        help: "IANA zone to cut cohort days in (default: the app's configured zone, else report_time_zone, else UTC); a report's stored days stay in the configured zone.")
    var timeZone: String?

    @Option(help: "table, markdown, csv or json (onramp funnel: also html).")
    var format: String = "table"

    func validate() throws {
        for (flag, day) in [("--from", from), ("--to", to)] {
            if let day, !CohortCalendar.isDayText(day) {
                throw ValidationError("\(flag) must be a day as YYYY-MM-DD (got '\(day)')")
            }
        }
        if let timeZone, TimeZone(identifier: timeZone) == nil {
            throw ValidationError("--time-zone '\(timeZone)' is not an IANA time zone (e.g. Europe/Berlin)")
        }
    }

    /// Throws unless the format is one of `formats`.
    func check(formats: [String]) throws {
        guard formats.contains(format) else {
            throw ValidationError("--format must be one of \(formats.joined(separator: ", ")) (got '\(format)')")
        }
    }
}
