/// What one person's events say about why they left (docs/funnels.md, "Why they drop off"), worked out
/// once per person and funnel by the nightly job and stored, so reports over
/// any range of cohort days add them up without reading the log again.
///
/// The facts do not depend on the clock: they look only at the person's
/// events up to the end of their window. Whether the window has closed (and
/// so whether they count as dropped) is the outcome's business.
public struct DropOffFacts: Sendable, Hashable {
    /// A label done on one transition: between the chain's step at
    /// `stepIndex` and the next required step (converters), or after it to
    /// the window's end (those whose highest step it is).
    public struct Label: Sendable, Hashable, Comparable {
        /// Position in `Funnel.steps` of the transition's first step.
        public var stepIndex: Int
        public var label: String

        public init(stepIndex: Int, label: String) {
            self.stepIndex = stepIndex
            self.label = label
        }

        public static func < (l: Label, r: Label) -> Bool { (l.stepIndex, l.label) < (r.stepIndex, r.label) }
    }

    /// For persons who did not complete: microseconds from their highest
    /// step (t_k) to their last event within the window.
    public var lingering: Int64?
    /// For persons who did not complete: the label of their first event after
    /// t_k (strictly later, within the window) labelled otherwise than the
    /// step-k event; nil when there is none.
    public var nextLabel: String?
    /// Distinct candidate labels per transition the person took part in,
    /// ascending: labels of the funnel's steps are not candidates.
    public var labels: [Label]

    public init(lingering: Int64? = nil, nextLabel: String? = nil, labels: [Label] = []) {
        self.lingering = lingering
        self.nextLabel = nextLabel
        self.labels = labels
    }

    /// The label `nextLabel` stands for when there is none, in every output.
    public static let noFurtherEvents = "(no further events)"

    /// What `of` needs of a funnel, worked out once rather than per person.
    public struct Shape: Sendable {
        /// Positions in `Funnel.steps` of the required steps.
        public let required: [Int]
        /// Names of every matcher of every step: labels that are never candidates.
        let stepLabels: Set<String>

        public init(_ funnel: Funnel) {
            required = funnel.requiredStepIndices
            stepLabels = Set(funnel.steps.flatMap { $0.matchers.map(\.name) })
        }
    }

    /// The facts of one person's outcome in `funnel`, from their events (each
    /// message once); nil for persons the diagnostics do not count: never at
    /// step 1, or excluded.
    public static func of(_ outcome: PersonOutcome, in funnel: Funnel, shape: Shape, events: [FunnelEvent]) -> DropOffFacts? {
        let level = min(outcome.level, shape.required.count)
        guard level >= 1, !outcome.excluded, outcome.stepTimes.count == funnel.steps.count else { return nil }
        var times: [Int64] = []
        times.reserveCapacity(level)
        for position in 0..<level {
            guard let time = outcome.stepTimes[shape.required[position]] else { return nil }
            times.append(time)
        }
        let highest = times[level - 1]
        let dropped = level < shape.required.count
        let (sum, overflow) = times[0].addingReportingOverflow(funnel.windowMicroseconds)
        let windowEnd = overflow ? Int64.max : sum
        let highestStep = funnel.steps[shape.required[level - 1]]
        // With `order: any` the k-th step done may be any of the steps.
        func isHighestStep(_ event: FunnelEvent) -> Bool {
            funnel.order == .any ? shape.required.contains { funnel.steps[$0].matches(event) } : highestStep.matches(event)
        }
        // The step-k event's label: of the events at t_k that match the step, the least.
        var highestLabel: String?
        if dropped {
            for event in events where event.timestamp == highest && isHighestStep(event) {
                let label = event.label
                if highestLabel.map({ label < $0 }) ?? true { highestLabel = label }
            }
        }
        var labels = Set<Label>()
        var last = highest
        var next: (time: Int64, label: String)?
        for event in events {
            let time = event.timestamp
            guard time > times[0] else { continue }
            let label = event.label
            let candidate = !shape.stepLabels.contains(label)
            if time < highest {
                // On the chain: the transition whose open interval holds it.
                guard candidate, let k = times.lastIndex(where: { $0 < time }), k + 1 < level, time < times[k + 1] else { continue }
                labels.insert(Label(stepIndex: shape.required[k], label: label))
            } else if dropped && time <= windowEnd {
                last = max(last, time)
                guard time > highest else { continue }
                if candidate { labels.insert(Label(stepIndex: shape.required[level - 1], label: label)) }
                if label != highestLabel, next.map({ (time, label) < ($0.time, $0.label) }) ?? true { next = (time, label) }
            }
        }
        return DropOffFacts(lingering: dropped ? last - highest : nil, nextLabel: next?.label, labels: labels.sorted())
    }
}

extension FunnelEvent {
    /// What the diagnostics call an event (docs/funnels.md, "Why they drop off"), as `analytics.events`
    /// names it: a track event's name, a screen's or page's name, or for
    /// identify, group and alias messages (and a nameless screen or page) the
    /// message type.
    public var label: String {
        switch kind {
        case .identify, .group, .alias: kind.rawValue
        case .track, .screen, .page: name ?? kind.rawValue
        }
    }
}
