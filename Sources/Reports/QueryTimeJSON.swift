public import Funnels

/// The JSON of `onramp funnel --format json`: one element of `onramp report
/// --format json`'s `funnels`, plus what only a query gives: conversion by
/// cohort day (`trends`), the completers' times binned (`time_to_convert`)
/// and what the query read (`query`).
public enum QueryTimeJSON {
    public struct Query: Sendable {
        public var asOf: String
        public var from: String?
        public var to: String?
        public var events: Int
        /// The audiences the persons counted are in (`--audience`) and not in (`--not-audience`).
        public var audiences: [String]
        public var notAudiences: [String]
        /// The first day the log holds the app's events from, when earlier months are archived (docs/lifecycle.md).
        public var logFrom: String?

        public init(
            asOf: String, from: String?, to: String?, events: Int, audiences: [String] = [], notAudiences: [String] = [], logFrom: String? = nil
        ) {
            self.logFrom = logFrom
            self.asOf = asOf
            self.from = from
            self.to = to
            self.events = events
            self.audiences = audiences
            self.notAudiences = notAudiences
        }
    }

    public static func render(_ report: FunnelReport, histogram: [TimeHistogram.Bin], query: Query) -> String {
        guard case .object(var fields) = JSONReport.funnel(report) else { return "" }
        fields.append((
            "trends",
            .array(report.cohorts.map { day in
                .object([
                    ("day", .string(day.day)), ("started", .number(Double(day.started))), ("completed", .number(Double(day.completed))),
                    ("in_progress", .number(Double(day.inProgressPersons))), ("open", .bool(day.inProgress)),
                    ("conversion", JSONReport.rate(day.completionRate)),
                ])
            })))
        fields.append((
            "time_to_convert",
            .array(histogram.map { bin in
                .object([("from_seconds", .number(bin.from)), ("to_seconds", bin.to.map(JSON.number) ?? .null), ("persons", .number(Double(bin.persons)))])
            })))
        fields.append((
            "query",
            .object([
                ("as_of", .string(query.asOf)), ("from", query.from.map(JSON.string) ?? .null), ("to", query.to.map(JSON.string) ?? .null),
                ("events", .number(Double(query.events))),
                ("audiences", .array(query.audiences.map(JSON.string))), ("not_audiences", .array(query.notAudiences.map(JSON.string))),
                ("log_from", query.logFrom.map(JSON.string) ?? .null),
            ])))
        return JSON.object(fields).serialized() + "\n"
    }
}
