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

}
