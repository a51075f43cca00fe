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
