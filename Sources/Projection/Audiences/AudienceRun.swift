public import Foundation
import EventLog
import Funnels
public import LibPQ
import LogReading

/// `onramp audiences run`, meant for a timer every few minutes
/// (docs/audiences.md, "Keeping up between nights"): the nightly job's
/// incremental run when anything came since the last run (new events, an
/// erasure, a changed definition), which keeps the funnels and the
/// audiences alike; otherwise only the members whose spans began or ended
/// since the last run, without reading the log.
extension ProjectionJob {
    public struct AudienceRunSummary: Sendable, Equatable {
        /// The job's run, when it ran; nil when nothing came since the last.
        public var job: Summary?
        public var entered: Int
        public var left: Int
    }

    /// Runs on `c` (blocking), under the job's lock: throws `busy` when a night holds it.
    public func runAudiences(_ c: Connection, now: Int64 = Timestamps.microseconds(Date())) throws -> AudienceRunSummary {
        try Self.locked(c) {
            let quiet = try c.transaction(isolation: .repeatableRead) { c -> AudienceMembership.Summary? in
                let stored = try AudienceDefinitions.Stored.load(c)
                guard try !hasNews(c, stored: stored) else { return nil }
                return try AudienceMembership.update(
                    c, audiences: configuration.audiences, stored: stored, whole: [], touched: false, now: now)
            }
            if let quiet { return AudienceRunSummary(job: nil, entered: quiet.entered, left: quiet.left) }
            let summary = try runCommitted(c, mode: .incremental, now: now)
            return AudienceRunSummary(job: summary, entered: summary.audiencesEntered, left: summary.audiencesLeft)
        }
    }

    /// Whether the job has anything to read or redo: events of the funnels'
    /// apps committed since its checkpoint, an erasure waiting, a funnel or
    /// audience whose definition changed.
    private func hasNews(_ c: Connection, stored: AudienceDefinitions.Stored) throws -> Bool {
        if try c.query("SELECT EXISTS (SELECT 1 FROM privacy_pending)").scalar(Bool.self) { return true }
        let changes = try DefinitionChanges.compare(c, configuration: configuration, timeZone: configuration.timeZoneIdentifier(for:))
        if !changes.isEmpty { return true }
        if !stored.changed(configuration.audiences).isEmpty { return true }
        let layout = try EventLogLayout.read(c)
        let window = LogWindow(from: try Checkpoint.load(c), to: try Checkpoint.settled(c, layout: layout))
        try window.bind(c)
        return try c.query(
            "SELECT EXISTS (SELECT 1 FROM events e WHERE e.app = ANY($1::text[]) AND \(LogWindow.condition))",
            [.textArray(Array(Set(configuration.funnels.map(\.app))))]
        ).scalar(Bool.self)
    }
}
