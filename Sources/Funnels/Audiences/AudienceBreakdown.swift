/// A funnel broken down by an audience (`breakdowns: [audience:NAME]`,
/// docs/audiences.md, "Breaking a funnel down"): each person's value is
/// whether they are a member at the report's clock, `in` or `not in`,
/// beside the breakdowns read from events. The engine leaves the value to
/// whoever knows the members: the nightly job evaluates the audience on the
/// person's own history, query time reads the members the job last kept.
public enum AudienceBreakdown {
    public static let prefix = "audience:"
    public static let member = "in"
    public static let nonMember = "not in"

    /// The audience a breakdown dimension names, nil for a message path.
    public static func audience(of dimension: String) -> String? {
        guard dimension.hasPrefix(prefix) else { return nil }
        let name = dimension.dropFirst(prefix.count)
        return name.isEmpty ? nil : String(name)
    }

    public static func value(member: Bool) -> String { member ? Self.member : nonMember }
}

extension Funnel {
    /// The audiences this funnel is broken down by, in its order.
    public var audienceBreakdowns: [String] { breakdowns.compactMap(AudienceBreakdown.audience(of:)) }
}

extension PersonOutcome {
    /// Sets the outcome's value of each of `funnel`'s audience breakdowns from `isMember`.
    public mutating func setAudienceBreakdowns(of funnel: Funnel, isMember: (String) -> Bool) {
        for dimension in funnel.breakdowns {
            guard let audience = AudienceBreakdown.audience(of: dimension) else { continue }
            breakdown[dimension] = AudienceBreakdown.value(member: isMember(audience))
        }
    }
}
