import Foundation
import Funnels
import LibPQ
import LogReading

/// How a run differs by mode, and nothing else: what it reads, whom it
/// recomputes, and which cohort days it rewrites with what tallies. The
/// read-and-evaluate pipeline, the per-person analyses and the cohort tables
/// are the same for both plans (`ProjectionJob.run`), which is what keeps a
/// rebuild and the incremental runs giving the same tables.
protocol ProjectionPlan {
    var mode: ProjectionJob.Mode { get }

    /// Settles the stored tables before any history is read; returns the
    /// events each app's history will be read for (its order and sizing).
    mutating func prepare(_ run: ProjectionRun) throws -> Reading

    /// Whom to recompute in `app`: nil for every person its history holds.
    func persons(of app: String) -> Set<String>?

    /// `app`'s history, as this plan reads it; called once per app, in the
    /// order `Reading.readers` gives.
    mutating func history(of reader: PersonHistoryReader, _ run: ProjectionRun) throws -> SpilledHistory

    /// Called after every person was evaluated, before the cohort days are
    /// rewritten: puts back what `prepare` set aside, takes what it left to
    /// the background.
    mutating func finishEvaluation(_ run: ProjectionRun) throws

    /// The cohort days to rewrite, given what the evaluation touched.
    func cohortDays(evaluated: Set<FunnelDay>) -> Set<FunnelDay>

    /// The stored tallies `tallies` starts from, of every funnel's `days`
    /// in one read (none for a plan that counts every person).
    func storedTallies(_ run: ProjectionRun, days: Set<FunnelDay>) throws -> [String: [String: TallyStore.Stored]]

    /// The tallies of `days` of `funnel`, given what the evaluation counted
    /// and the funnel's `stored` tallies.
    func tallies(
        _ run: ProjectionRun, funnel: Funnel, days: Set<String>, counted: [String: FunnelTally], stored: [String: TallyStore.Stored]
    ) throws -> [String: FunnelTally]

    /// Outcomes whose window closed since the last run, closed in place.
    var windowsClosed: Int { get }

    /// The cohort days the archive froze, and who keeps rows there (read by `prepare`).
    var frozen: FrozenDays { get }

    /// How the stored days of `analysis` changed before evaluation; nil
    /// when the plan counts every person (a rebuild).
    func storedDayChange(of analysis: any PersonAnalysis) -> StoredDayChange?
}

/// What a run reads: the apps in the order their histories go through the
/// pipeline, the new events per app, and the partitions each history is cut into.
struct Reading {
    var readers: [PersonHistoryReader]
    var newEvents: [String: Int]
    var partitions: Int
    /// Events the run expects to read (for progress), when known.
    var expectedEvents: Int?
}

extension ProjectionPlan {
    /// The apps' history readers, small apps at both ends of the pipeline
    /// (`ProjectionJob.pipelineOrder`), without those nobody is recomputed in.
    func readers(_ run: ProjectionRun, sizes: [String: Int]) -> [PersonHistoryReader] {
        ProjectionJob.pipelineOrder(run.apps, sizes: sizes).compactMap { app -> PersonHistoryReader? in
            if let persons = persons(of: app), persons.isEmpty { return nil }
            let funnels = run.configuration.funnels(forApp: app)
            let audiences = run.configuration.audiences(forApp: app)
            return PersonHistoryReader(
                app: app, paths: Array(Set(funnels.flatMap(\.referencedPaths) + audiences.flatMap(\.referencedPaths))).sorted(),
                countsGroups: funnels.contains { $0.aggregateBy == .group })
        }
    }
}
