import Foundation
public import Funnels

/// `onramp events --app NAME`: what an app sends, label by label, from the
/// event catalogue (docs/tracking-health.md), as a table or JSON.
public enum EventCatalogText {
    /// One label's summary over the days read.
    struct Label {
        var label: String
        var events = 0
        var personDays = 0
        var days = 0
        var firstSeen = Int64.max, lastSeen = Int64.min
        var versions: [String: Int] = [:]
        var platforms: [String: Int] = [:]
    }

    static func labels(_ counts: EventCatalogCounts) -> [Label] {
        var byLabel: [String: Label] = [:]
        // Days per label: the most any one version and OS was seen on (a lower bound on the label's days).
        for total in counts.totals {
            let name = EventCatalogCounts.label(type: total.type, event: total.event)
            var label = byLabel[name] ?? Label(label: name)
            label.events += total.events
            label.personDays += total.personDays
            label.days = max(label.days, total.days)
            label.firstSeen = min(label.firstSeen, total.firstSeen)
            label.lastSeen = max(label.lastSeen, total.lastSeen)
            label.versions[total.version.isEmpty ? "(none)" : total.version, default: 0] += total.events
            label.platforms[total.os.isEmpty ? "(none)" : total.os, default: 0] += total.events
            byLabel[name] = label
        }
        return byLabel.values.sorted { ($0.events, $1.label) > ($1.events, $0.label) }
    }

    /// `2.3.0 61%, 2.2.1 30%`: the largest first, at most four and the rest.
    static func shares(_ counts: [String: Int], total: Int) -> String {
        let sorted = counts.sorted { ($0.value, $1.key) > ($1.value, $0.key) }
        var parts = sorted.prefix(4).map { "\($0.key) \(Formatting.percent(Double($0.value) / Double(max(1, total)), digits: 0))" }
        if sorted.count > 4 { parts.append("+\(sorted.count - 4) more") }
        return parts.joined(separator: ", ")
    }

    public static func table(app: String, counts: EventCatalogCounts) -> String {
        let labels = labels(counts)
        guard !labels.isEmpty else {
            return "\(app): no events in the catalogue (it is kept by `onramp report`; has the job run since events arrived?)\n"
        }
        var out = "\(app): \(labels.count) labels\n\n"
        let header = ["label", "events", "persons/day", "first seen", "last seen", "versions", "platforms"]
        var rows: [[String]] = [header]
        for l in labels {
            rows.append([
                l.label, "\(l.events)", String(format: "%.1f", Double(l.personDays) / Double(max(1, l.days))),
                Formatting.minute(l.firstSeen), Formatting.minute(l.lastSeen),
                shares(l.versions, total: l.events), shares(l.platforms, total: l.events),
            ])
        }
        out += Formatting.columns(rows, right: [1, 2])
        if !counts.paths.isEmpty {
            let totals = counts.totals.reduce(into: [String: Int]()) { $0[$1.type + "\u{1F}" + $1.event + "\u{1F}" + $1.version, default: 0] += $1.events }
            var rows: [[String]] = [["label", "version", "property", "type", "events", "share"]]
            for p in counts.paths {
                let total = totals[p.type + "\u{1F}" + p.event + "\u{1F}" + p.version] ?? 0
                rows.append([
                    EventCatalogCounts.label(type: p.type, event: p.event), p.version.isEmpty ? "(none)" : p.version, p.path, p.jsonType, "\(p.events)",
                    total == 0 ? "—" : Formatting.percent(Double(p.events) / Double(total)),
                ])
            }
            out += "\nproperties\n" + Formatting.columns(rows, right: [4, 5])
        }
        return out
    }


    public static func json(app: String, counts: EventCatalogCounts) -> String {
        let paths = Dictionary(grouping: counts.paths) { EventCatalogCounts.label(type: $0.type, event: $0.event) }
        let document: JSON = .object([
            ("app", .string(app)),
            ("labels", .array(labels(counts).map { l in
                .object([
                    ("label", .string(l.label)), ("events", .number(Double(l.events))), ("person_days", .number(Double(l.personDays))),
                    ("first_seen", .string(Formatting.minute(l.firstSeen))), ("last_seen", .string(Formatting.minute(l.lastSeen))),
                    ("versions", .object(l.versions.sorted { $0.key < $1.key }.map { ($0.key, .number(Double($0.value))) })),
                    ("platforms", .object(l.platforms.sorted { $0.key < $1.key }.map { ($0.key, .number(Double($0.value))) })),
                    ("properties", .array((paths[l.label] ?? []).map { p in
                        .object([
                            ("version", .string(p.version)), ("path", .string(p.path)), ("type", .string(p.jsonType)), ("events", .number(Double(p.events))),
                        ])
                    })),
                ])
            })),
        ])
        return document.serialized() + "\n"
    }
}
