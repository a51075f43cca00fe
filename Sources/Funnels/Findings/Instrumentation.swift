/// What the event catalogue holds of one app (docs/tracking-health.md), as
/// the instrumentation check and `onramp events` read it.
public struct EventCatalogCounts: Sendable, Equatable {
    /// A label's events in one app version on one OS, over the days read.
    public struct Total: Sendable, Hashable {
        public var type: String
        /// The track event's or screen's name; "" for identify, group and alias.
        public var event: String
        public var version: String
        public var os: String
        public var events: Int
        /// Persons summed over days (a person on two days counts twice).
        public var personDays: Int
        public var days: Int
        /// The last day with an event, and the first and last event's times.
        public var lastDay: String
        public var firstSeen: Int64
        public var lastSeen: Int64

        public init(
            type: String, event: String, version: String, os: String, events: Int, personDays: Int, days: Int = 1, lastDay: String,
            firstSeen: Int64 = 0, lastSeen: Int64 = 0
        ) {
            self.type = type
            self.event = event
            self.version = version
            self.os = os
            self.events = events
            self.personDays = personDays
            self.days = days
            self.lastDay = lastDay
            self.firstSeen = firstSeen
            self.lastSeen = lastSeen
        }
    }

    /// A label's events and persons on one recent day, every version and OS together.
    public struct Day: Sendable, Hashable {
        public var type: String
        public var event: String
        public var day: String
        public var events: Int
        public var persons: Int

        public init(type: String, event: String, day: String, events: Int, persons: Int) {
            self.type = type
            self.event = event
            self.day = day
            self.events = events
            self.persons = persons
        }
    }

    /// The events of a label in one app version that carried a property path with one JSON type.
    public struct Path: Sendable, Hashable {
        public var type: String
        public var event: String
        public var version: String
        public var path: String
        public var jsonType: String
        public var events: Int

        public init(type: String, event: String, version: String, path: String, jsonType: String, events: Int) {
            self.type = type
            self.event = event
            self.version = version
            self.path = path
            self.jsonType = jsonType
            self.events = events
        }
    }

    public var totals: [Total]
    public var recentDays: [Day]
    public var paths: [Path]

    public init(totals: [Total] = [], recentDays: [Day] = [], paths: [Path] = []) {
        self.totals = totals
        self.recentDays = recentDays
        self.paths = paths
    }

    /// The label as a step names it: `event: X`, `screen: X`, or the message type.
    public static func label(type: String, event: String) -> String {
        if event.isEmpty { return type }
        return type == "track" ? "event: \(event)" : "\(type): \(event)"
    }
}

/// A sign that the app's tracking broke rather than its users leaving
/// (docs/tracking-health.md): found beside the regressions, at the same
/// versions they compare.
public struct InstrumentationFinding: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// The newest version never sends a step's event that the version before it sent.
        case eventVanished = "event_vanished"
        /// The same on one platform (`context.os.name`).
        case eventVanishedOnPlatform = "event_vanished_on_platform"
        /// No event of a step arrived for the last closed days, while the funnel's first step's did.
        case stepUnmatched = "step_unmatched"
        /// A property a step's `where` or a breakdown reads stopped coming in the newest version.
        case propertyVanished = "property_vanished"
        /// It comes with another JSON type in the newest version.
        case propertyTypeChanged = "property_type_changed"
    }

    public var funnel: String
    public var kind: Kind
    /// The step's row name.
    public var step: String
    /// The events the step matches, as labels (`event: otp_verified`).
    public var labels: [String]
    /// The property, for property findings.
    public var path: String?
    /// The platform, for `eventVanishedOnPlatform`.
    public var platform: String?
    /// What is compared: the version before and the newest (`2.3.1`,
    /// `2.4.0`), or for `stepUnmatched` the day last seen and the closed days without.
    public var baseline: String
    public var recent: String
    /// Events (or, for property types, the JSON type's events) on each side.
    public var baselineEvents: Int
    public var recentEvents: Int
    /// The newest version's starters (persons who sent step 1's event), or the last closed days' for `stepUnmatched`.
    public var recentStarters: Int
    /// For a type change, the types on each side.
    public var baselineType: String?
    public var recentType: String?

    /// One sentence for the terminal, markdown and the alert message.
    public var sentence: String {
        let what = labels.joined(separator: " | ")
        switch kind {
        case .eventVanished:
            return "\(funnel): step \(step): \(recent) never sent \(what) (\(recentStarters) starters); \(baseline) sent it \(baselineEvents) times"
        case .eventVanishedOnPlatform:
            return "\(funnel): step \(step): \(recent) on \(platform ?? "?") never sent \(what) (\(recentStarters) starters); \(baseline) on \(platform ?? "?") sent it \(baselineEvents) times"
        case .stepUnmatched:
            return "\(funnel): step \(step): no \(what) for the \(recent) (last seen \(baseline)), while \(recentStarters) persons started"
        case .propertyVanished:
            return "\(funnel): step \(step): \(path ?? "?") missing from \(what) in \(recent); \(baseline) sent it on \(baselineEvents) events"
        case .propertyTypeChanged:
            return "\(funnel): step \(step): \(path ?? "?") of \(what) is \(recentType ?? "?") in \(recent), was \(baselineType ?? "?") in \(baseline)"
        }
    }
}

/// Finds `InstrumentationFinding`s for a funnel from the event catalogue.
public enum InstrumentationCheck {
    /// Closed days without a step's event before it is reported (`stepUnmatched`).
    public static let unmatchedDays = 3
    /// Share of a label's events that carried a property before its
    /// disappearance counts: a property sent now and then is not missed.
    public static let carriedShare = 0.5

    /// `funnel`'s findings: at `versions` (the older and the newest app
    /// version the regression check compares, when it compares two), and
    /// over the `unmatchedDays` closed days up to `newestClosedDay`.
    public static func findings(
        funnel: Funnel, catalog: EventCatalogCounts, versions: (older: String, newest: String)?, newestClosedDay: String,
        minPersons: Int, unmatchedDays: Int = unmatchedDays
    ) -> [InstrumentationFinding] {
        let steps = funnel.requiredStepIndices.map { (funnel.rowName($0), funnel.steps[$0]) }
        guard let first = steps.first else { return [] }
        func keys(_ step: FunnelStep) -> Set<String> {
            Set(step.matchers.map { $0.kind.messageType.rawValue + "\u{1F}" + $0.name })
        }
        func labels(_ step: FunnelStep) -> [String] {
            step.matchers.map { EventCatalogCounts.label(type: $0.kind.messageType.rawValue, event: $0.name) }
        }
        func rows(_ step: FunnelStep) -> [EventCatalogCounts.Total] {
            let wanted = keys(step)
            return catalog.totals.filter { wanted.contains($0.type + "\u{1F}" + $0.event) }
        }
        var found: [InstrumentationFinding] = []
        func finding(
            _ kind: InstrumentationFinding.Kind, _ name: String, _ step: FunnelStep, baseline: String, recent: String, baselineEvents: Int,
            recentEvents: Int, starters: Int, path: String? = nil, platform: String? = nil, types: (String, String)? = nil
        ) {
            found.append(InstrumentationFinding(
                funnel: funnel.name, kind: kind, step: name, labels: labels(step), path: path, platform: platform, baseline: baseline,
                recent: recent, baselineEvents: baselineEvents, recentEvents: recentEvents, recentStarters: starters,
                baselineType: types?.0, recentType: types?.1))
        }
        let starting = rows(first.1)
        /// `rows`' events (or `persons` of the first step: its starters) in `version`, on `os` when given.
        func sum(_ rows: [EventCatalogCounts.Total], in version: String, on os: String? = nil, persons: Bool = false) -> Int {
            rows.reduce(0) { $1.version == version && (os == nil || $1.os == os) ? $0 + (persons ? $1.personDays : $1.events) : $0 }
        }

        if let versions {
            let starters = sum(starting, in: versions.newest, persons: true)
            for (name, step) in steps.dropFirst() {
                let stepRows = rows(step)
                let before = sum(stepRows, in: versions.older), now = sum(stepRows, in: versions.newest)
                if before > 0, now == 0 {
                    finding(.eventVanished, name, step, baseline: versions.older, recent: versions.newest, baselineEvents: before,
                            recentEvents: 0, starters: starters)
                    continue
                }
                for os in Set(starting.filter { $0.version == versions.newest }.map(\.os)).sorted() {
                    let platformStarters = sum(starting, in: versions.newest, on: os, persons: true)
                    guard platformStarters >= minPersons else { continue }
                    let before = sum(stepRows, in: versions.older, on: os), now = sum(stepRows, in: versions.newest, on: os)
                    if before > 0, now == 0 {
                        finding(.eventVanishedOnPlatform, name, step, baseline: versions.older, recent: versions.newest,
                                baselineEvents: before, recentEvents: 0, starters: platformStarters, platform: os)
                    }
                }
            }
            // Properties a step's `where` reads on its own events, and the breakdowns on the first step's.
            var read: [(String, FunnelStep, String)] = []
            for (name, step) in steps {
                for path in Set(step.matchers.flatMap(\.conditions.keys)).sorted() where path.hasPrefix("properties.") {
                    read.append((name, step, path))
                }
            }
            for path in funnel.breakdowns where path.hasPrefix("properties.") { read.append((first.0, first.1, path)) }
            var seen = Set<String>()
            for (name, step, path) in read where seen.insert(name + "\u{1F}" + path).inserted {
                let wanted = keys(step)
                let carrying = catalog.paths.filter { $0.path == path && wanted.contains($0.type + "\u{1F}" + $0.event) }
                let stepRows = rows(step)
                func byType(_ version: String) -> [String: Int] {
                    carrying.filter { $0.version == version }.reduce(into: [:]) { $0[$1.jsonType, default: 0] += $1.events }
                }
                let before = byType(versions.older), now = byType(versions.newest)
                let beforeCarried = before.values.reduce(0, +)
                guard sum(stepRows, in: versions.newest) > 0,
                      Double(beforeCarried) >= carriedShare * Double(max(1, sum(stepRows, in: versions.older))) else { continue }
                if now.isEmpty {
                    finding(.propertyVanished, name, step, baseline: versions.older, recent: versions.newest, baselineEvents: beforeCarried,
                            recentEvents: 0, starters: starters, path: path)
                } else if let was = dominant(before), let is_ = dominant(now), was != is_ {
                    finding(.propertyTypeChanged, name, step, baseline: versions.older, recent: versions.newest,
                            baselineEvents: before[was] ?? 0, recentEvents: now[is_] ?? 0, starters: starters, path: path, types: (was, is_))
                }
            }
        }

        // Steps no event matched for the last closed days, while people started.
        guard let newest = CohortCalendar.dayNumber(ofText: newestClosedDay) else { return found }
        let windowStart = CohortCalendar.text(ofDay: newest - Int64(unmatchedDays) + 1)
        let firstKeys = keys(first.1)
        let started = catalog.recentDays.filter { firstKeys.contains($0.type + "\u{1F}" + $0.event) && $0.day >= windowStart && $0.day <= newestClosedDay }
            .reduce(0) { $0 + $1.persons }
        if started >= minPersons {
            for (name, step) in steps.dropFirst() {
                let stepRows = rows(step)
                guard let last = stepRows.map(\.lastDay).max(), last < windowStart else { continue }
                finding(.stepUnmatched, name, step, baseline: last, recent: "last \(unmatchedDays) closed days",
                        baselineEvents: stepRows.reduce(0) { $0 + $1.events }, recentEvents: 0, starters: started)
            }
        }
        return found
    }

    /// Labels the regressions `findings` likely explain: a conversion to a
    /// step whose event vanished or stopped arriving, and completion when
    /// any did. A regression so labelled is still reported, as what it is.
    public static func label(_ regressions: inout RegressionFindings, with findings: [InstrumentationFinding]) {
        let broken = findings.filter { [.eventVanished, .eventVanishedOnPlatform, .stepUnmatched].contains($0.kind) }
        guard let any = broken.first else { return }
        func explain(_ change: MetricChange) -> MetricChange {
            var change = change
            if let step = change.step, change.metric == .conversionFromPrevious {
                change.likelyInstrumentation = broken.first { $0.step == step }?.sentence
            } else if change.metric == .completionRate {
                change.likelyInstrumentation = any.sentence
            }
            return change
        }
        regressions.regressions = regressions.regressions.map(explain)
        regressions.tested = regressions.tested.map(explain)
    }

    /// The JSON type most events carried, the first by name on a tie.
    private static func dominant(_ counts: [String: Int]) -> String? {
        counts.max { ($0.value, $1.key) < ($1.value, $0.key) }?.key
    }
}
