import Foundation

/// Why persons dropped off a funnel (docs/funnels.md, "Why they drop off"), for a range of cohort days:
/// time at each step, what those who dropped did instead, and the
/// breakdown values and events that go with converting or not.
public struct DropOffDiagnostics: Sendable, Hashable {
    /// Persons whose duration fell in [from, to) seconds (`to` nil: no bound).
    public struct Bin: Sendable, Hashable {
        public var from: Double
        public var to: Double?
        public var persons: Int
    }

    /// Median, p90 (`percentile_cont`) and histogram of some durations.
    public struct Spread: Sendable, Hashable {
        public var persons: Int
        public var median: Double?
        public var p90: Double?
        public var histogram: [Bin]
    }

    public struct NextEvent: Sendable, Hashable {
        public var label: String
        public var persons: Int
        /// Of the step's drop-offs.
        public var share: Double
    }

    /// One required step.
    public struct Step: Sendable, Hashable {
        /// 1-based position in the configured steps.
        public var index: Int
        public var name: String
        /// t_k − t_(k−1) over persons who reached it; nil for step 1.
        public var secondsFromPrevious: Spread?
        /// Reached it as their highest step, window closed, not excluded.
        public var dropped: Int
        /// From t_k to their last event within the window, over `dropped`.
        public var lingeringSeconds: Spread
        /// Most common first.
        public var nextEvents: [NextEvent]
    }

    public enum Kind: String, Sendable, Hashable, Codable {
        case breakdown, event
    }

    /// A candidate at one transition, with its 2×2 table and tests.
    public struct Driver: Sendable, Hashable {
        /// 1-based configured indices of the transition's two required steps.
        public var from: Int
        public var to: Int
        public var kind: Kind
        /// The breakdown dimension; nil for events.
        public var dimension: String?
        /// The breakdown value or the event label.
        public var value: String
        public var table: TwoByTwo
        public var oddsRatio: Double
        public var ci95: ConfidenceInterval
        public var pValue: Double
        public var qValue: Double

        /// Persons having it.
        public var persons: Int { table.a + table.b }
        public var converted: Int { table.a }
        public var dropped: Int { table.b }
    }

    public var minSupport: Int
    /// Required steps, in order.
    public var steps: [Step]
    /// Every candidate with the support, most significant first.
    public var drivers: [Driver]

    /// Histogram edges in seconds: a fixed, log-like scale, so histograms of
    /// any cohort days add up and compare.
    public static let binEdges: [Double] = [0, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21_600, 43_200, 86_400]

    /// The diagnostics of the persons `tally` and `counts` hold (the same
    /// persons: a funnel's cohort days, added up).
    public init(funnel: Funnel, tally: FunnelTally, counts: DropOffCounts) {
        minSupport = funnel.minSupport
        let required = funnel.requiredStepIndices
        let window = Double(funnel.windowSeconds)
        steps = required.enumerated().map { position, index in
            let lingering = FunnelReport.seconds(counts.lingering[index] ?? [])
            let next = (counts.next[index] ?? [:]).map { label, persons in
                NextEvent(label: label, persons: persons, share: lingering.isEmpty ? 0 : Double(persons) / Double(lingering.count))
            }
            return Step(
                index: index + 1, name: funnel.rowName(index),
                secondsFromPrevious: position == 0
                    ? nil : Self.spread(FunnelReport.seconds(tally.steps[index].gaps), window: window),
                dropped: lingering.count, lingeringSeconds: Self.spread(lingering, window: window),
                nextEvents: next.sorted { ($1.persons, $0.label) < ($0.persons, $1.label) })
        }
        var drivers: [Driver] = []
        for (candidate, has) in counts.allCandidates(required: required) where has.converted + has.dropped >= funnel.minSupport {
            guard let all = counts.transitions[candidate.stepIndex],
                  let position = required.firstIndex(of: candidate.stepIndex), position + 1 < required.count
            else { continue }
            let table = TwoByTwo(
                a: has.converted, b: has.dropped, c: max(0, all.converted - has.converted), d: max(0, all.dropped - has.dropped))
            let ratio = table.oddsRatio
            drivers.append(
                Driver(
                    from: candidate.stepIndex + 1, to: required[position + 1] + 1, kind: candidate.kind,
                    dimension: candidate.kind == .breakdown ? candidate.dimension : nil, value: candidate.value, table: table,
                    oddsRatio: ratio.value, ci95: ratio.ci95, pValue: table.fisherExactP, qValue: 1))
        }
        for (index, q) in Statistics.benjaminiHochberg(drivers.map(\.pValue)).enumerated() { drivers[index].qValue = q }
        self.drivers = drivers.sorted(by: Self.moreSignificant)
    }

    /// Smaller p first, then the stronger effect, then a stable order.
    static func moreSignificant(_ l: Driver, _ r: Driver) -> Bool {
        if l.pValue != r.pValue { return l.pValue < r.pValue }
        let strength = { (d: Driver) in abs(log(d.oddsRatio)) }
        if strength(l) != strength(r) { return strength(l) > strength(r) }
        return (l.from, l.kind.rawValue, l.dimension ?? "", l.value) < (r.from, r.kind.rawValue, r.dimension ?? "", r.value)
    }

    /// The drivers other outputs show: q < 0.05, the `limit` most
    /// significant of each direction (converting less, converting more), so
    /// that many strong ones one way never hide the other; most significant first.
    public func significantDrivers(limit: Int = 10) -> [Driver] {
        let significant = drivers.filter { $0.qValue < 0.05 }
        let less = significant.filter { $0.oddsRatio < 1 }.prefix(limit), more = significant.filter { !($0.oddsRatio < 1) }.prefix(limit)
        return (less + more).sorted(by: Self.moreSignificant)
    }

    /// The spread of `values`, in any order: each falls in the first bin
    /// that ends after it (a few bins, looked through in turn).
    static func spread(_ values: [Double], window: Double) -> Spread {
        let edges = binEdges.filter { $0 < window } + [window]
        var bins = zip(edges, edges.dropFirst()).map { Bin(from: $0, to: $1, persons: 0) }
        bins.append(Bin(from: window, to: nil, persons: 0))
        let ends = bins.compactMap(\.to)
        for value in values {
            bins[ends.firstIndex { value < $0 } ?? ends.count].persons += 1
        }
        let persons = values.count
        let percentiles = Statistics.percentilesCont(values, [0.5, 0.9])
        return Spread(persons: persons, median: percentiles[0], p90: percentiles[1], histogram: bins)
    }
}

/// The counts diagnostics are made of, for some persons: what the nightly
/// job stores per funnel and cohort day, and a report adds up.
public struct DropOffCounts: Sendable, Hashable, Codable {
    public struct Pair: Sendable, Hashable, Codable {
        public var converted = 0
        public var dropped = 0

        public init(converted: Int = 0, dropped: Int = 0) {
            self.converted = converted
            self.dropped = dropped
        }

        public mutating func add(_ other: Pair) {
            converted += other.converted
            dropped += other.dropped
        }
    }

    public struct Candidate: Sendable, Hashable, Codable {
        /// Position in `Funnel.steps` of the transition's first step.
        public var stepIndex: Int
        public var kind: DropOffDiagnostics.Kind
        /// Empty for events.
        public var dimension: String
        public var value: String

        public init(stepIndex: Int, kind: DropOffDiagnostics.Kind, dimension: String, value: String) {
            self.stepIndex = stepIndex
            self.kind = kind
            self.dimension = dimension
            self.value = value
        }
    }

    /// Step position -> microseconds each person dropped there lingered.
    public var lingering: [Int: [Int64]] = [:]
    /// Step position -> next label -> persons dropped there.
    public var next: [Int: [String: Int]] = [:]
    /// Transition (its first step's position) -> persons converting and dropping.
    public var transitions: [Int: Pair] = [:]
    /// Event candidate -> persons having it, converting and dropping.
    public var candidates: [Candidate: Pair] = [:]

    /// A breakdown dimension and one of its values.
    public struct BreakdownValue: Sendable, Hashable, Codable {
        public var dimension: String
        public var value: String

        public init(dimension: String, value: String) {
            self.dimension = dimension
            self.value = value
        }
    }

    /// Breakdown candidates: value -> persons having it, converting and
    /// dropping, per transition (its position among the required steps).
    /// Kept by value rather than by transition because a person's values
    /// are the same on every transition: adding one person looks each value
    /// up once, not once per transition.
    public var breakdowns: [BreakdownValue: [Pair]] = [:]

    /// Every candidate with its counts: the events', and the breakdown
    /// values' on each transition they had persons on, keyed by the
    /// transition's first step (`required[position]`).
    public func allCandidates(required: [Int]) -> [Candidate: Pair] {
        var all = candidates
        for (key, pairs) in breakdowns {
            for (position, pair) in pairs.enumerated() where position < required.count && pair.converted + pair.dropped > 0 {
                all[Candidate(stepIndex: required[position], kind: .breakdown, dimension: key.dimension, value: key.value)] = pair
            }
        }
        return all
    }

    public init() {}
}

extension DropOffCounts {
    /// Adds one person's outcome in the funnel whose required steps are at
    /// `required`, with the facts of it, if it counts: once its window has
    /// closed, completed or not (`PersonOutcome.windowClosed`).
    public mutating func add(_ outcome: PersonOutcome, facts: DropOffFacts, required: [Int]) {
        guard outcome.windowClosed else { return }
        add(level: outcome.level, completed: outcome.completed, breakdown: outcome.breakdown, facts: facts, required: required)
    }

    /// Adds one person whose window has closed, not
    /// excluded, at `level` ≥ 1 of the funnel whose required steps are at
    /// `required`: their lingering and next event if they dropped, and
    /// every transition they took part in with their breakdown values and
    /// the labels they did on it.
    public mutating func add(level: Int, completed: Bool, breakdown: [String: String], facts: DropOffFacts, required: [Int]) {
        let level = min(level, required.count)
        guard level >= 1 else { return }
        if !completed {
            let step = required[level - 1]
            lingering[step, default: []].append(facts.lingering ?? 0)
            next[step, default: [:]][facts.nextLabel ?? DropOffFacts.noFurtherEvents, default: 0] += 1
        }
        let taken = min(level, required.count - 1)
        guard taken > 0 else { return }
        for (dimension, value) in breakdown {
            let key = BreakdownValue(dimension: dimension, value: value)
            if breakdowns[key] == nil { breakdowns[key] = Array(repeating: Pair(), count: required.count - 1) }
            // Converted on every transition before the last one taken; dropped on it unless completed.
            breakdowns[key]?.withUnsafeMutableBufferPointer { pairs in
                for position in 0..<taken {
                    if level > position + 1 { pairs[position].converted += 1 } else { pairs[position].dropped += 1 }
                }
            }
        }
        var labels = facts.labels[...]
        for position in 0..<taken {
            let step = required[position]
            let pair = Pair(converted: level > position + 1 ? 1 : 0, dropped: level == position + 1 ? 1 : 0)
            transitions[step, default: Pair()].add(pair)
            while let label = labels.first, label.stepIndex <= step {
                labels = labels.dropFirst()
                guard label.stepIndex == step else { continue }
                candidates[Candidate(stepIndex: step, kind: .event, dimension: "", value: label.label), default: Pair()].add(pair)
            }
        }
    }

    /// Adds every count of `other` (counts of other persons of the same funnel).
    public mutating func merge(_ other: DropOffCounts) {
        lingering.merge(other.lingering, uniquingKeysWith: +)
        for (step, labels) in other.next { next[step, default: [:]].merge(labels, uniquingKeysWith: +) }
        for (step, pair) in other.transitions { transitions[step, default: Pair()].add(pair) }
        for (candidate, pair) in other.candidates { candidates[candidate, default: Pair()].add(pair) }
        for (key, theirs) in other.breakdowns {
            guard var mine = breakdowns[key] else {
                breakdowns[key] = theirs
                continue
            }
            if mine.count < theirs.count { mine += Array(repeating: Pair(), count: theirs.count - mine.count) }
            for (position, pair) in theirs.enumerated() { mine[position].add(pair) }
            breakdowns[key] = mine
        }
    }
}

extension DropOffCounts {
    /// Removes every count of `other`, counts of persons these hold (one
    /// lingering time per person, each where it was added); what no person
    /// is left in goes, so the result equals the counts of those remaining.
    public mutating func subtract(_ other: DropOffCounts) {
        for (step, values) in other.lingering {
            guard let mine = lingering[step] else { continue }
            var removing = [Int64: Int]()
            for value in values { removing[value, default: 0] += 1 }
            let kept = mine.filter { value in
                guard let n = removing[value], n > 0 else { return true }
                removing[value] = n - 1
                return false
            }
            lingering[step] = kept.isEmpty ? nil : kept
        }
        for (step, labels) in other.next {
            for (label, persons) in labels {
                let left = (next[step]?[label] ?? 0) - persons
                next[step]?[label] = left > 0 ? left : nil
            }
            if next[step]?.isEmpty == true { next[step] = nil }
        }
        func minus(_ a: Pair, _ b: Pair) -> Pair? {
            let pair = Pair(converted: a.converted - b.converted, dropped: a.dropped - b.dropped)
            return pair.converted <= 0 && pair.dropped <= 0 ? nil : pair
        }
        for (step, pair) in other.transitions { transitions[step] = transitions[step].flatMap { minus($0, pair) } }
        for (candidate, pair) in other.candidates { candidates[candidate] = candidates[candidate].flatMap { minus($0, pair) } }
        for (key, theirs) in other.breakdowns {
            guard var mine = breakdowns[key] else { continue }
            for (position, pair) in theirs.enumerated() where mine.indices.contains(position) {
                mine[position] = minus(mine[position], pair) ?? Pair()
            }
            breakdowns[key] = mine.allSatisfy { $0.converted == 0 && $0.dropped == 0 } ? nil : mine
        }
    }
}
