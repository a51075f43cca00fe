/// Default display names for steps.
///
/// Names are what analysts read and what targets reference, so they stay as
/// short as possible (the event or screen name) and grow `where` values only
/// when two steps would otherwise share a name (e.g. forma's five
/// `onboarding_step_viewed` steps).
enum StepNaming {
    /// The matcher names joined with `" | "`.
    static func plainLabel(_ matchers: [EventMatcher]) -> String {
        matchers.map(\.name).joined(separator: " | ")
    }

    /// Like `plainLabel`, but each matcher shows its `where` values,
    /// e.g. `onboarding_step_viewed (step=welcome)`.
    static func detailedLabel(_ matchers: [EventMatcher]) -> String {
        matchers.map { matcher in
            guard !matcher.conditions.isEmpty else { return matcher.name }
            let filters = matcher.conditions.keys.sorted().map { path in
                let leaf = path.split(separator: ".").last.map(String.init) ?? path
                return "\(leaf)=\(matcher.conditions[path] ?? "")"
            }
            return "\(matcher.name) (\(filters.joined(separator: ", ")))"
        }.joined(separator: " | ")
    }

    /// Resolves names for steps: explicit names are kept; generated names are
    /// made unique first with `where` values, then with a `#position` suffix.
    static func resolve(explicit: [String?], matchers: [[EventMatcher]]) -> [String] {
        var names = zip(explicit, matchers).map { $0 ?? plainLabel($1) }
        for pass in 0..<2 {
            var counts: [String: Int] = [:]
            for name in names { counts[name, default: 0] += 1 }
            for index in names.indices where explicit[index] == nil && (counts[names[index]] ?? 0) > 1 {
                names[index] = pass == 0
                    ? detailedLabel(matchers[index])
                    : "\(names[index]) #\(index + 1)"
            }
        }
        return names
    }
}
