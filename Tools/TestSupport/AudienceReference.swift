public import Funnels

/// Whether a unit is in an audience at an instant, evaluated there and
/// nowhere else (docs/audiences.md): the funnel evaluated again at that
/// clock, the events counted, cohort days cut in UTC. What `AudienceSpans`
/// and the job's kept members are checked against.
public enum AudienceReference {
    /// The audiences tests' app and funnel: `yoked`'s three-step `signup`,
    /// 24 h, ending with `audiences:` for a test to list its own under.
    public static let signupConfiguration = """
        apps:
          - name: yoked
        funnels:
          - name: signup
            app: yoked
            window: 24h
            steps:
              - event: started
              - event: phone_entered
              - event: otp_verified
        audiences:

        """

    /// A second funnel of `signupConfiguration`'s app, from the phone step
    /// on, broken down by two audiences the tests define: `stalled` (over
    /// `signup`) and `helped_lately` (over behaviour). One entry of
    /// `funnels:`, to go before `audiences:`.
    public static let verifiedFunnel = """
          - name: verified
            app: yoked
            window: 12h
            breakdowns: [audience:stalled, audience:helped_lately]
            steps:
              - event: phone_entered
              - event: otp_verified

        """

    /// Whether the unit whose events are `events` meets `condition` at `instant`.
    public static func holds(_ condition: AudienceCondition, events: [FunnelEvent], at instant: Int64) -> Bool {
        switch condition {
        case .funnel(let standing):
            let outcome = FunnelEvaluator.evaluate(distinctEvents: events, funnel: standing.funnel, now: instant)
            guard outcome.level > 0, !outcome.excluded, let start = outcome.startTime else { return false }
            if let days = standing.days, (instant / 86_400_000_000) - (start / 86_400_000_000) >= Int64(days) { return false }
            let required = standing.funnel.requiredStepIndices
            let step = (standing.step ?? 1) - 1
            let position = required.firstIndex(of: step)
            switch standing.outcome {
            case .completed: return outcome.completed
            case .cell(.reached): return position.map { outcome.level > $0 } ?? outcome.optionalStepsDone.contains(step)
            case .cell(.converted): return position.map { outcome.level > $0 + 1 } ?? false
            case .cell(.dropped): return position.map { outcome.level == $0 + 1 } == true && !outcome.completed && !outcome.inProgress
            case .cell(.inProgress): return position.map { outcome.level == $0 + 1 } == true && !outcome.completed && outcome.inProgress
            case .stalled(let seconds):
                guard position.map({ outcome.level == $0 + 1 }) == true, !outcome.completed, outcome.inProgress,
                      let reached = outcome.stepTimes[step] else { return false }
                return reached + seconds * 1_000_000 <= instant
            }
        case .behaviour(let behaviour):
            let count = events.filter { event in
                event.timestamp <= instant && behaviour.matchers.contains { $0.matches(event) }
                    && behaviour.withinSeconds.map { event.timestamp > instant - $0 * 1_000_000 } ?? true
            }.count
            return (count >= behaviour.times) == behaviour.did
        case .allOf(let operands): return operands.allSatisfy { holds($0, events: events, at: instant) }
        case .anyOf(let operands): return operands.contains { holds($0, events: events, at: instant) }
        case .not(let operand): return !holds(operand, events: events, at: instant)
        }
    }


    /// Persons who start, stall, finish, ask for help, sign in on the way
    /// (some through an alias), over `hours` hours before `clock`, a few of
    /// their events arriving a round late.
    /// With `groups`, some name one of eight companies in a `group` call as they start.
    public static func signupRound(
        _ rng: inout SplitMix, round: Int, clock: Int64, hours: Int64, groups: Bool = false
    ) -> (now: [SeedEvent], late: [SeedEvent]) {
        var now: [SeedEvent] = [], late: [SeedEvent] = []
        for p in 0..<40 {
            let anonymous = "anon-\(round)-\(p)"
            // Some come back: a person of an earlier round, under their user id.
            let user: String? = rng.next() % 3 == 0 ? "user-\(rng.next() % 60)" : nil
            var t = clock - Int64(rng.next() % UInt64(hours * 3600)) * 1_000_000
            let steps = Int(rng.next() % 4)
            if groups, rng.next() % 3 == 0 {
                now.append(SeedEvent(
                    app: "yoked", type: "group", messageId: "\(anonymous)-group", anonymousId: anonymous, timestamp: t,
                    groupId: "co-\(rng.next() % 8)"))
            }
            for (n, name) in ["started", "phone_entered", "otp_verified"].prefix(steps).enumerated() {
                let identified = user != nil && n >= 1
                let event = SeedEvent(
                    app: "yoked", messageId: "\(anonymous)-\(n)", event: name, anonymousId: anonymous, userId: identified ? user : nil,
                    timestamp: t)
                if rng.next() % 8 == 0 { late.append(event) } else { now.append(event) }
                t += Int64(rng.next() % 5400) * 1_000_000
            }
            for h in 0..<Int(rng.next() % 3) {
                now.append(SeedEvent(
                    app: "yoked", messageId: "\(anonymous)-help-\(h)", event: "help_opened", anonymousId: anonymous,
                    timestamp: clock - Int64(rng.next() % 10_800) * 1_000_000))
            }
            if let user, rng.next() % 4 == 0 {
                now.append(SeedEvent(
                    app: "yoked", type: "alias", messageId: "\(anonymous)-alias", userId: user + "-new", timestamp: t,
                    previousId: user))
            }
        }
        return (now, late)
    }

    /// `audience|person` of each member at `now` (a group as its timeline
    /// key), from the events alone: persons joined by the identity rule,
    /// groups made of their members, each history evaluated at the clock.
    public static func members(_ events: [SeedEvent], configuration: FunnelConfiguration, now: Int64) -> Set<String> {
        var observations: [IdentityObservation] = []
        for event in events where event.userId != nil {
            if let anonymous = event.anonymousId {
                observations.append(IdentityObservation(anonymousId: anonymous, userId: event.userId, timestamp: event.timestamp))
            }
            if let previous = event.previousId {
                observations.append(IdentityObservation(anonymousId: previous, userId: event.userId, timestamp: event.timestamp))
            }
        }
        let persons = IdentityResolver.persons(of: IdentityResolver.links(from: observations))
        var histories: [String: [FunnelEvent]] = [:]
        for event in events {
            guard let id = event.userId ?? event.anonymousId else { continue }
            let person = persons[id] ?? id
            histories[person, default: []].append(FunnelEvent(
                messageId: event.messageId, kind: EventKind(rawValue: event.type) ?? .track, name: event.event, timestamp: event.timestamp))
        }
        // A group's history: every event of every person whose group call named it (docs/funnels.md, "Counting groups").
        var memberships: [String: Set<String>] = [:]
        for event in events where event.type == "group" {
            guard let id = event.userId ?? event.anonymousId, let group = event.groupId else { continue }
            memberships[group, default: []].insert(persons[id] ?? id)
        }
        var groupHistories: [String: [FunnelEvent]] = [:]
        for (group, members) in memberships {
            groupHistories[group] = members.flatMap { histories[$0] ?? [] }
        }
        var members = Set<String>()
        for (units, aggregation, key) in [
            (histories, Funnel.Aggregation.person, { (id: String) in id }), (groupHistories, .group, { "\u{1F}" + $0 }),
        ] {
            for (unit, history) in units {
                let sorted = history.sorted { ($0.timestamp, $0.messageId) < ($1.timestamp, $1.messageId) }
                for audience in configuration.audiences where audience.aggregateBy == aggregation
                    && AudienceReference.holds(audience.condition, events: sorted, at: now) {
                    members.insert("\(audience.name)|\(key(unit))")
                }
            }
        }
        return members
    }
}
