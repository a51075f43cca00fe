import Foundation
import Funnels

/// Answers already counted, kept beside the store they were counted from
/// and reused while they are exact: the store holds the same events, and
/// the clock has not passed a window that was open (a person's outcome
/// changes without new events only when one closes, `PersonOutcome.openUntil`).
/// What is kept is the counts by cohort day, not the report: the report is
/// drawn at each query's own clock, as `onramp report` draws it from the
/// stored days. A dashboard asking the same funnel again, or two analysts
/// asking one, pay for it once per change of the log.
struct AnswerCache {
    let directory: URL

    /// Entries kept; the oldest go first.
    static let capacity = 64

    /// Each day's tally in the nightly job's stored form (`TallyEncoding`:
    /// varints, times delta-coded), far smaller than JSON and read as fast.
    private struct Entry: Codable {
        var key: String
        var events: Int
        var countedAt: Int64
        var validUntil: Int64?
        var days: [String: Data]
        /// Each analysis's counts by day (`FunnelAnalysis.encode`), by its id.
        var analyses: [String: Data]
    }

    /// What makes two queries the same question: the definition as the nightly
    /// job fingerprints it (its zone included), the days, what was asked
    /// besides, and the audiences it reads with their members.
    static func key(_ query: FunnelQuery) -> String {
        let definition = FunnelDefinition(query.funnel, timeZone: query.timeZone)
        let text = [
            definition.fingerprint, query.from ?? "", query.to ?? "", query.analyses.map(\.id.rawValue).sorted().joined(separator: ","),
            query.audiences.fingerprint,
        ].joined(separator: "|")
        return ColumnStore.key(text)
    }

    /// The counts of `query`, if they were counted from the same `events` and still hold at its clock.
    func lookup(_ query: FunnelQuery, events: Int) -> QueryEvaluation.Counted? {
        let key = Self.key(query)
        guard let data = try? Data(contentsOf: file(key)), let entry = try? JSONDecoder().decode(Entry.self, from: data),
              entry.key == key, entry.events == events, entry.countedAt <= query.now, entry.validUntil.map({ query.now < $0 }) ?? true,
              // Tallies of an earlier form lack counts the report now shows: counted again.
              entry.days.values.allSatisfy({ $0.first == TallyEncoding.version }),
              let days = try? entry.days.mapValues({ try TallyEncoding.decode([UInt8]($0), funnel: query.funnel) }),
              let analyses = try? query.analyses.map({ analysis in try entry.analyses[analysis.id.rawValue].map { try analysis.decode($0) } ?? [:] })
        else { return nil }
        return QueryEvaluation.Counted(days: days, analyses: analyses, validUntil: entry.validUntil)
    }

    /// Keeps `counted` for `query`; a cache that cannot be written is only slower.
    /// A list of persons is not kept: written as JSON, a long one cost more
    /// time and memory than counting it again (BENCHMARKS.md, "Explore").
    func store(_ counted: QueryEvaluation.Counted, query: FunnelQuery, events: Int) {
        guard !query.analyses.contains(where: \.listsPersons) else { return }
        let key = Self.key(query)
        var analyses: [String: Data] = [:]
        for (analysis, days) in zip(query.analyses, counted.analyses) {
            guard let data = try? analysis.encode(days) else { return }
            analyses[analysis.id.rawValue] = data
        }
        let entry = Entry(
            key: key, events: events, countedAt: query.now, validUntil: counted.validUntil,
            days: counted.days.mapValues { Data(TallyEncoding.encode($0)) }, analyses: analyses)
        guard let data = try? JSONEncoder().encode(entry) else { return }
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        guard (try? ColumnFile.replace(file(key), with: data)) != nil else { return }
        prune()
    }

    private func file(_ key: String) -> URL { directory.appendingPathComponent("\(key).json") }

    private func prune() {
        let keys: [URLResourceKey] = [.contentModificationDateKey]
        guard let files = try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: keys),
              files.count > Self.capacity
        else { return }
        let dated = files.map { ($0, (try? $0.resourceValues(forKeys: Set(keys)).contentModificationDate) ?? .distantPast) }
        for (file, _) in dated.sorted(by: { $0.1 < $1.1 }).prefix(files.count - Self.capacity) {
            try? FileManager.default.removeItem(at: file)
        }
    }
}
