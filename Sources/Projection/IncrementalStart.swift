import Foundation
import Funnels
import LibPQ

/// What an incremental run settles before it evaluates anyone: whom to
/// recompute (before any history is read), and which stored outcomes leave
/// the days' tallies — the touched persons' (deleted, to be recomputed) and
/// those whose window closed with no new events (closed in place). The
/// incremental plan's state; a rebuild has none of it.
struct IncrementalStart: Sendable {
    /// App -> the persons to recompute.
    var touched: [String: Set<String>] = [:]
    /// App -> anonymous id -> the person its events belong to, where not
    /// itself: what the history reads give anonymous events (`TouchedPersons`).
    var owners: [String: [String: String]] = [:]
    /// Persons with new events, all activity, who are not recomputed.
    var activity: [PersonActivity] = []
    /// Funnel days whose tables change before any person is recomputed.
    var affected = Set<FunnelDay>()
    /// Funnel -> cohort day -> tally of the outcomes deleted or closed, as they were stored.
    var removed: [String: [String: FunnelTally]] = [:]
    /// Funnel -> cohort day -> tally of the outcomes closed in place, as they are now.
    var closed: [String: [String: FunnelTally]] = [:]
    var windowsClosed = 0
    /// Funnel -> cohort days stored before there were tallies (migration 005).
    var untallied: [String: Set<String>] = [:]

    var personCount: Int { touched.values.reduce(0) { $0 + $1.count } }

    /// Updates the links from the day's events and collects the touched
    /// persons, with their keys on `reader`: enough to start reading their
    /// histories. Meanwhile the reader looks up the stored outcomes of the
    /// day's active keys (`NewEvents.activityKeys`).
    static func collect(
        _ c: Connection, day: NewEvents, lookup: PersonActivity.Lookup, reader: Connection
    ) throws -> IncrementalStart {
        var start = IncrementalStart()
        let prefetch = reader === c ? nil : PersonActivity.Prefetch(
            on: reader, of: day.activityKeys, lookup: lookup)
        // What it found is freed beside the run (`BackgroundRelease`), once it is over.
        defer { if let prefetch { BackgroundRelease.drop(prefetch) } }
        // Whatever happens below, the reader is not used again until the lookup is over.
        defer { prefetch?.stop() }
        // Every relink is needed up front to know whom to recompute.
        let relinks = try IdentityLinker.update(
            c, newLinks: day.links, byScan: lookup.byScan(links: day.links.values.reduce(0) { $0 + $1.count }))
        (start.touched, start.owners, start.activity) = try TouchedPersons.collect(
            c, day: day, relinks: relinks, lookup: lookup, reader: reader, prefetched: prefetch)
        return start
    }

    /// Deletes the touched persons' outcomes and closes the windows that
    /// closed since the last run, while their histories are read on the
    /// other session; `timeZone` is the job's zone for a funnel's cohort days.
    /// Returns the touched persons who had stored outcomes.
    mutating func removeStoredOutcomes(
        _ c: Connection, funnels configured: [Funnel], now: Int64, timeZone: (Funnel) -> TimeZone
    ) throws -> [NewEvents.Key] {
        let funnels = Dictionary(configured.map { ($0.name, $0) }) { first, _ in first }
        let shapes = funnels.mapValues(FunnelTally.Shape.init)
        func tally(_ tallies: inout [String: [String: FunnelTally]], _ name: String, _ cohortDay: String, _ outcome: PersonOutcome) {
            guard let funnel = funnels[name], let shape = shapes[name] else { return }  // no longer configured
            tallies[name, default: [:]][cohortDay, default: FunnelTally(funnel: funnel)]
                .add(outcome, shape: shape, cohortDay: cohortDay, timeZone: timeZone(funnel))
        }
        let hadOutcomes = try OutcomeStore.deleteTouched(c) { name, cohortDay, outcome in
            affected.insert(FunnelDay(funnel: name, day: cohortDay))
            tally(&removed, name, cohortDay, outcome)
        }
        try OutcomeStore.closeWindows(c, now: now) { name, cohortDay, outcome in
            affected.insert(FunnelDay(funnel: name, day: cohortDay))
            windowsClosed += 1
            // A completer was counted as completed already: only the
            // analyses' day tables change (`PersonAnalysis.storedDayChange`).
            guard !outcome.completed else { return }
            var open = outcome
            open.inProgress = true
            tally(&removed, name, cohortDay, open)
            tally(&closed, name, cohortDay, outcome)
        }
        // Open windows, and days stored before there were tallies.
        for row in try c.query(
            """
            SELECT funnel, cohort_day::text, NOT EXISTS (
                SELECT 1 FROM funnel_tallies t WHERE t.funnel = c.funnel AND t.cohort_day = c.cohort_day)
            FROM funnel_cohorts c
            WHERE in_progress
               OR NOT EXISTS (SELECT 1 FROM funnel_tallies t WHERE t.funnel = c.funnel AND t.cohort_day = c.cohort_day)
            """
        ).rows {
            let funnelDay = FunnelDay(funnel: try row.decode(String.self, at: 0), day: try row.decode(String.self, at: 1))
            affected.insert(funnelDay)
            if try row.decode(Bool.self, at: 2) { untallied[funnelDay.funnel, default: []].insert(funnelDay.day) }
        }
        return hadOutcomes
    }
}
