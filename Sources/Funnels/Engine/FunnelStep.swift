/// One step of a funnel: a single matcher, or `any_of` several alternatives.
///
/// Optional steps never influence reach, completion or time; they are only
/// reported as "did it between the surrounding required steps".
public struct FunnelStep: Sendable, Hashable {
    /// Display name, unique within the funnel; targets refer to steps by it.
    public var name: String
    /// Alternatives; the step matches when any of them does.
    public var matchers: [EventMatcher]
    public var isOptional: Bool
    /// Seconds this step may come after the previous required step on a
    /// chain, besides the funnel's window; nil: the window alone.
    public var within: Int64?

    /// `within` in the unit of `FunnelEvent.timestamp`, saturating.
    var withinMicroseconds: Int64? {
        within.map { seconds in
            let (value, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000)
            return overflow ? Int64.max : max(0, value)
        }
    }

    /// `name` defaults to the matcher names joined with `" | "`.
    public init(name: String? = nil, matchers: [EventMatcher], isOptional: Bool = false) {
        self.name = name ?? StepNaming.plainLabel(matchers)
        self.matchers = matchers
        self.isOptional = isOptional
    }

    public init(name: String? = nil, _ matcher: EventMatcher, isOptional: Bool = false) {
        self.init(name: name, matchers: [matcher], isOptional: isOptional)
    }

    public func matches(_ event: FunnelEvent) -> Bool {
        matchers.contains { $0.matches(event) }
    }
}
