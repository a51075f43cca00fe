/// A proportion with its 95 % Wilson interval; every rate in a report is one
/// of these so no rate is ever shown without its uncertainty (docs/funnels.md).
public struct Rate: Sendable, Hashable {
    public var successes: Int
    public var trials: Int

    public init(successes: Int, trials: Int) {
        self.successes = successes
        self.trials = trials
    }

    /// `nil` when there are no trials (rather than a misleading 0).
    public var value: Double? {
        trials > 0 ? Double(successes) / Double(trials) : nil
    }

    public var ci95: ConfidenceInterval? {
        Statistics.wilson(successes: successes, trials: trials)
    }
}
