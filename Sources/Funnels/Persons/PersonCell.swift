/// One number of a funnel's report, as the persons it counts (docs/funnels.md,
/// "The persons behind a number"): a step's row as the report prints it and
/// one of its outcomes, optionally narrowed to one breakdown value. A cell
/// holds exactly the persons the report counts there, so a list's length is
/// the report's number.
public struct PersonCell: Sendable, Hashable, CustomStringConvertible {
    /// What happened to a person at the step.
    public enum Outcome: String, Sendable, CaseIterable {
        /// Reached the step (its row's `persons`).
        case reached
        /// Reached the step and the next required one.
        case converted
        /// Reached the step, not the next, and their window has closed (`drop_off`).
        case dropped
        /// Reached the step, not the next, and their window is still open (`in_progress`).
        case inProgress = "in_progress"
    }

    /// One value of one breakdown dimension, as the funnel's attribution gives it.
    public struct BreakdownValue: Sendable, Hashable {
        public var path: String
        public var value: String

        public init(path: String, value: String) {
            self.path = path
            self.value = value
        }
    }

    public var outcome: Outcome
    /// The report's row, from 1: configured steps in order, optional ones included.
    public var step: Int
    /// Only the persons with this value (nil: everyone in the cell).
    public var breakdown: BreakdownValue?

    public init(_ outcome: Outcome, step: Int, breakdown: BreakdownValue? = nil) {
        self.outcome = outcome
        self.step = step
        self.breakdown = breakdown
    }

    /// `OUTCOME:STEP`, e.g. `dropped:3`, and ` where PATH=VALUE` when narrowed.
    public var description: String {
        "\(outcome.rawValue):\(step)" + (breakdown.map { " where \($0.path)=\($0.value)" } ?? "")
    }

    /// A cell of `funnel` from its text (`dropped:3`) and an optional
    /// `PATH=VALUE`, checked against the funnel: the row exists, the outcome
    /// means something there, the path is one of its breakdowns.
    public static func parse(_ text: String, breakdownValue: String? = nil, in funnel: Funnel) throws(PersonCellError) -> PersonCell {
        let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 else { throw .malformed(text) }
        guard let outcome = Outcome(rawValue: parts[0]) else { throw .unknownOutcome(parts[0]) }
        guard let step = Int(parts[1]) else { throw .malformed(text) }
        guard funnel.steps.indices.contains(step - 1) else { throw .stepOutOfRange(step, steps: funnel.steps.count) }
        let index = step - 1
        if funnel.steps[index].isOptional, outcome != .reached {
            throw .optionalStep(outcome, step: step)
        }
        if outcome == .converted, funnel.requiredStepIndices.last == index {
            throw .convertedAtLastStep(step)
        }
        var cell = PersonCell(outcome, step: step)
        if let breakdownValue {
            let pair = breakdownValue.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard pair.count == 2, !pair[0].isEmpty else { throw .malformedBreakdownValue(breakdownValue) }
            guard funnel.breakdowns.contains(pair[0]) else { throw .notABreakdown(pair[0], breakdowns: funnel.breakdowns) }
            cell.breakdown = BreakdownValue(path: pair[0], value: pair[1])
        }
        return cell
    }

    /// Throws `unknownBreakdownValue` when the cell's breakdown value is
    /// none of those `report` (of the cell's funnel) counts.
    public func check(against report: FunnelReport) throws(PersonCellError) {
        guard let breakdown, report.breakdown(breakdown.path)?.value(breakdown.value) == nil else { return }
        throw .unknownBreakdownValue(breakdown, known: report.breakdown(breakdown.path)?.values.map(\.value).sorted() ?? [])
    }

    /// Whether the person whose outcome this is counts in the cell, by the
    /// rule `FunnelTally.add` counts the report's rows with (`required`:
    /// `Funnel.requiredStepIndices`).
    public func contains(_ outcome: PersonOutcome, required: [Int]) -> Bool {
        guard !outcome.excluded, outcome.level > 0 else { return false }
        if let breakdown, (outcome.breakdown[breakdown.path] ?? PersonOutcome.missingBreakdownValue) != breakdown.value { return false }
        let index = step - 1
        guard let position = required.firstIndex(of: index) else {
            return self.outcome == .reached && outcome.optionalStepsDone.contains(index)
        }
        let stoppedHere = outcome.level == position + 1 && !outcome.completed
        switch self.outcome {
        case .reached: return outcome.level > position
        case .converted: return outcome.level > position + 1
        case .dropped: return stoppedHere && !outcome.inProgress
        case .inProgress: return stoppedHere && outcome.inProgress
        }
    }
}

/// Why a cell cannot be listed, naming what was given and what is expected.
public enum PersonCellError: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    case unknownOutcome(String)
    case stepOutOfRange(Int, steps: Int)
    case optionalStep(PersonCell.Outcome, step: Int)
    case convertedAtLastStep(Int)
    case malformedBreakdownValue(String)
    case notABreakdown(String, breakdowns: [String])
    case unknownBreakdownValue(PersonCell.BreakdownValue, known: [String])
    case lastStepHasNoDropOff(Int)
    case optionalStepHasNoDropOff(Int)

    public var description: String {
        switch self {
        case .malformed(let text):
            "'\(text)' is not OUTCOME:STEP (expected e.g. dropped:3)"
        case .unknownOutcome(let outcome):
            "unknown outcome '\(outcome)' (expected reached, converted, dropped or in_progress)"
        case .stepOutOfRange(let step, let steps):
            "step \(step) is out of range (the funnel's rows are 1 to \(steps))"
        case .optionalStep(let outcome, let step):
            "\(outcome.rawValue):\(step): step \(step) is optional, only reached:\(step) lists its persons"
        case .convertedAtLastStep(let step):
            "converted:\(step): step \(step) is the last required step, no one converts from it (reached:\(step) lists who got there)"
        case .malformedBreakdownValue(let text):
            "--breakdown-value: '\(text)' is not PATH=VALUE (expected e.g. context.os.name=iOS)"
        case .notABreakdown(let path, let breakdowns):
            "--breakdown-value: '\(path)' is not a breakdown of the funnel (its breakdowns: \(breakdowns.isEmpty ? "none" : breakdowns.joined(separator: ", ")))"
        case .lastStepHasNoDropOff(let step):
            "step \(step) is the last required step, no one drops there (give an earlier step)"
        case .optionalStepHasNoDropOff(let step):
            "step \(step) is optional, no one drops there (give a required step)"
        case .unknownBreakdownValue(let value, let known):
            "--breakdown-value: the funnel has no \(value.path)=\(value.value) (its values: \(known.prefix(20).joined(separator: ", "))\(known.count > 20 ? ", …" : ""))"
        }
    }
}
