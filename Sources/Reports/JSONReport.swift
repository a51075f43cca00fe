import Foundation
import Funnels

/// The JSON document of `onramp report --format json` (docs/nightly-job.md; fields in a stable order, more may be added).
enum JSONReport {
    static func render(_ reports: [FunnelReport], range: ReportRange) -> String {
        let (regressions, improvements) = RegressionText.all(reports)
        let document: JSON = .object([
            ("generated_at", .string(range.generatedAt)),
            ("range", .object([("from", range.from.map(JSON.string) ?? .null), ("to", range.to.map(JSON.string) ?? .null)])),
            ("regressions", .array(regressions.map(change))),
            ("improvements", .array(improvements.map(change))),
            ("instrumentation", .array(InstrumentationText.all(reports).map(InstrumentationText.json))),
            ("funnels", .array(reports.map(funnel))),
        ])
        return document.serialized() + "\n"
    }

    /// One regression or improvement, as docs/funnels.md lists them.
    static func change(_ c: MetricChange) -> JSON {
        func side(_ s: MetricChange.Side) -> JSON {
            .object([
                ("label", .string(s.label)), ("value", .optional(s.value)), ("persons", .number(Double(s.persons))),
                ("ci95", s.ci95.map { .array([.number($0.lower), .number($0.upper)]) } ?? .null),
            ])
        }
        return .object([
            ("funnel", .string(c.funnel)), ("kind", .string(c.kind.rawValue)), ("metric", .string(c.metric.rawValue)),
            ("step", c.step.map(JSON.string) ?? .null), ("baseline", side(c.baseline)), ("recent", side(c.recent)),
            ("difference", .number(c.difference)), ("p_value", .number(c.pValue)), ("q_value", .number(c.qValue)),
            ("likely_instrumentation", c.likelyInstrumentation.map(JSON.string) ?? .null),
        ])
    }

    static func funnel(_ r: FunnelReport) -> JSON {
        // A funnel counting groups says so after its options; one counting persons, as it always has.
        let json = funnelFields(r)
        guard r.aggregateBy == .group || !r.analyses.isEmpty, case .object(var fields) = json else { return json }
        if r.aggregateBy == .group { fields.insert(("aggregate_by", .string(r.aggregateBy.rawValue)), at: min(7, fields.count)) }
        // Analyses without a field of their own, after the ones that have one; only when there are any.
        if !r.analyses.isEmpty {
            let position = fields.firstIndex { $0.0 == "recomputed" } ?? fields.count
            fields.insert(("analyses", .object(r.analyses.sorted { $0.key < $1.key }.map { ($0.key.rawValue, finding($0.value)) })), at: position)
        }
        return .object(fields)
    }

    /// The frozen cohort days (docs/lifecycle.md), or null.
    private static func frozen(_ note: FrozenDaysNote?) -> JSON {
        guard let note else { return .null }
        return .object([("before", .string(note.before)), ("earlier_definition", .bool(note.earlierDefinition))])
    }

    private static func funnelFields(_ r: FunnelReport) -> JSON {
        let retentionByDay = Dictionary((r.retention?.cohorts ?? []).map { ($0.day, $0.days) }) { first, _ in first }
        return .object([
            ("funnel", .string(r.funnel)),
            ("app", .string(r.app)),
            ("window_seconds", .number(Double(r.windowSeconds))),
            ("time_zone", .string(r.timeZone)),
            ("frozen", frozen(r.frozen)),
            ("order", .string(r.order.rawValue)),
            ("hold", .array(r.hold.map(JSON.string))),
            ("attribution", .string(r.attribution)),
            ("started", .number(Double(r.started))),
            ("completed", .number(Double(r.completed))),
            ("in_progress", .number(Double(r.inProgress))),
            ("excluded", .number(Double(r.excludedPersons))),
            (
                "steps",
                .array(
                    r.steps.map { s in
                        .object([
                            ("index", .number(Double(s.index))), ("name", .string(s.name)), ("optional", .bool(s.isOptional)),
                            ("persons", .number(Double(s.persons))),
                            ("conversion_from_previous", .optional(s.conversionFromPrevious.value)),
                            ("conversion_from_start", .optional(s.conversionFromStart.value)),
                            ("drop_off", .number(Double(s.dropOff))), ("in_progress", .number(Double(s.inProgress))),
                            ("median_seconds_from_previous", .optional(s.medianSecondsFromPrevious)),
                            ("within_seconds", s.withinSeconds.map { .number(Double($0)) } ?? .null),
                        ])
                    })
            ),
            ("completion_rate", rate(r.completionRate)),
            (
                "time_to_complete_seconds",
                .object([
                    ("median", .optional(r.timeToComplete.medianSeconds)), ("p90", .optional(r.timeToComplete.p90Seconds)),
                    ("completers", .number(Double(r.timeToComplete.completers))),
                ])
            ),
            (
                "targets",
                .array(
                    r.targets.map { t in
                        .object([
                            ("name", .string(t.name)), ("threshold", .number(t.threshold)), ("value", .optional(t.value)),
                            ("met", .bool(t.met)),
                        ])
                    })
            ),
            (
                "cohorts",
                .array(
                    r.cohorts.map { d in
                        var fields: [(String, JSON)] = [
                            ("day", .string(d.day)), ("started", .number(Double(d.started))),
                            ("completed", .number(Double(d.completed))), ("in_progress", .bool(d.inProgress)),
                            ("in_progress_persons", .number(Double(d.inProgressPersons))),
                            ("completion_rate", rate(d.completionRate)),
                        ]
                        if r.retention != nil {
                            fields.append(("retention", .array((retentionByDay[d.day] ?? []).map(retentionDay))))
                        }
                        return .object(fields)
                    })
            ),
            (
                "breakdowns",
                .object(
                    r.breakdowns.map { b in
                        (
                            b.dimension,
                            .array(
                                b.values.map { v in
                                    var fields: [(String, JSON)] = [
                                        ("value", .string(v.value)), ("started", .number(Double(v.started))),
                                        ("completed", .number(Double(v.completed))), ("completion_rate", rate(v.completionRate)),
                                    ]
                                    // Per step, what a list of the value's persons (`--breakdown-value`) is compared with.
                                    if !v.steps.isEmpty {
                                        fields.append((
                                            "steps",
                                            .array(v.steps.enumerated().map { index, step in
                                                .object([
                                                    ("index", .number(Double(index + 1))), ("persons", .number(Double(step.persons))),
                                                    ("drop_off", .number(Double(step.dropOff))), ("in_progress", .number(Double(step.inProgress))),
                                                ])
                                            })))
                                    }
                                    return .object(fields)
                                })
                        )
                    })
            ),
            (
                "comparisons",
                .object(
                    r.breakdowns.map { b in
                        (
                            b.dimension,
                            .array(
                                Comparisons.against(baselineOf: b, in: r).map { c in
                                    .object([
                                        ("value", .string(c.a.value)), ("baseline", .string(c.b.value)),
                                        ("difference", .number(c.difference)), ("z", .number(c.z)), ("p_value", .number(c.pValue)),
                                    ])
                                })
                        )
                    })
            ),
            ("diagnostics", r.diagnostics.map(diagnostics) ?? .null),
            ("retention", r.retention.map { .array($0.days.map(retentionDay)) } ?? .null),
            (
                "recomputed",
                r.recomputed.map { .object([("reason", .string($0.reason)), ("events", .number(Double($0.events)))]) } ?? .null
            ),
        ])
    }

    /// An analysis's finding as it gave it.
    static func finding(_ value: AnalysisFinding) -> JSON {
        switch value {
        case .null: .null
        case .bool(let flag): .bool(flag)
        case .number(let number): .number(number)
        case .text(let text): .string(text)
        case .list(let values): .array(values.map(finding))
        case .fields(let fields): .object(fields.map { ($0.name, finding($0.value)) })
        }
    }

    /// docs/funnels.md, "Retention": one retention day, completers against non-completers.
    /// `rate` and `ci95` are null while nobody is eligible; `pending` counts
    /// the persons whose day has not passed yet.
    static func retentionDay(_ d: RetentionDay) -> JSON {
        func side(_ s: RetentionSide) -> JSON {
            .object([
                ("eligible", .number(Double(s.eligible))), ("retained", .number(Double(s.retained))),
                ("rate", .optional(s.rate.value)),
                ("ci95", s.rate.ci95.map { .array([.number($0.lower), .number($0.upper)]) } ?? .null),
                ("pending", .number(Double(s.pending))),
            ])
        }
        return .object([
            ("day", .number(Double(d.day))), ("completers", side(d.completers)), ("non_completers", side(d.nonCompleters)),
            ("difference", .optional(d.difference)), ("p_value", .optional(d.pValue)),
        ])
    }

    /// docs/funnels.md, "Why they drop off": every required step, every candidate with the support.
    static func diagnostics(_ d: DropOffDiagnostics) -> JSON {
        func spread(_ s: DropOffDiagnostics.Spread, histogram: Bool) -> JSON {
            var fields: [(String, JSON)] = [("median", .optional(s.median)), ("p90", .optional(s.p90))]
            if histogram {
                fields.append((
                    "histogram",
                    .array(s.histogram.map { .object([("from", .number($0.from)), ("to", .optional($0.to)), ("persons", .number(Double($0.persons)))]) })
                ))
            }
            fields.append(("persons", .number(Double(s.persons))))
            return .object(fields)
        }
        return .object([
            ("min_support", .number(Double(d.minSupport))),
            (
                "steps",
                .array(
                    d.steps.map { step in
                        .object([
                            ("index", .number(Double(step.index))), ("name", .string(step.name)),
                            ("seconds_from_previous", step.secondsFromPrevious.map { spread($0, histogram: true) } ?? .null),
                            ("dropped", .number(Double(step.dropped))),
                            ("lingering_seconds", spread(step.lingeringSeconds, histogram: false)),
                            (
                                "next_events",
                                .array(
                                    step.nextEvents.map {
                                        .object([("label", .string($0.label)), ("persons", .number(Double($0.persons))), ("share", .number($0.share))])
                                    })
                            ),
                        ])
                    })
            ),
            (
                "drivers",
                .array(
                    d.drivers.map { driver in
                        .object([
                            ("transition", .array([.number(Double(driver.from)), .number(Double(driver.to))])),
                            ("kind", .string(driver.kind.rawValue)), ("dimension", driver.dimension.map(JSON.string) ?? .null),
                            ("value", .string(driver.value)), ("persons", .number(Double(driver.persons))),
                            ("converted", .number(Double(driver.converted))), ("dropped", .number(Double(driver.dropped))),
                            ("odds_ratio", .number(driver.oddsRatio)),
                            ("ci95", .array([.number(driver.ci95.lower), .number(driver.ci95.upper)])),
                            ("p_value", .number(driver.pValue)), ("q_value", .number(driver.qValue)),
                            ("without", .object([("converted", .number(Double(driver.table.c))), ("dropped", .number(Double(driver.table.d)))])),
                        ])
                    })
            ),
        ])
    }

    static func rate(_ rate: Rate) -> JSON {
        .object([
            ("value", .optional(rate.value)),
            ("ci95", rate.ci95.map { .array([.number($0.lower), .number($0.upper)]) } ?? .null),
        ])
    }
}

/// A JSON value with ordered object keys, so documents read in a stable order.
indirect enum JSON {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    static func optional(_ value: Double?) -> JSON { value.map(JSON.number) ?? .null }

    /// Written into one string: nested strings joined at each level are
    /// copied again at every level, slow for a large report.
    func serialized() -> String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n):
            if !n.isFinite {
                out += "null"
            } else if n == n.rounded(), abs(n) < 1e15 {
                out += String(Int64(n))
            } else {
                out += "\(n)"
            }
        case .string(let s): Self.quote(s, into: &out)
        case .array(let items):
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case .object(let pairs):
            out += "{"
            for (index, (key, value)) in pairs.enumerated() {
                if index > 0 { out += "," }
                Self.quote(key, into: &out)
                out += ":"
                value.write(to: &out)
            }
            out += "}"
        }
    }

    private static func quote(_ s: String, into out: inout String) {
        out += "\""
        // Most strings (keys, names, dates) have nothing to escape: appended whole.
        guard s.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
            out += s
            out += "\""
            return
        }
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
