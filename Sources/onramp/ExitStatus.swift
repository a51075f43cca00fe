/// The exit statuses a scheduler tells apart (docs/operations.md), besides
/// 0 and ArgumentParser's own: what a report's findings call for, when
/// asked to fail on them. Missed targets win over everything but an
/// undelivered alert; broken instrumentation wins over a regression, which
/// it may explain.
enum ExitStatus: Int32, Sendable {
    /// A configured target missed (`--fail-on-missed-targets`).
    case missedTargets = 3
    /// A regression no instrumentation finding explains (`--fail-on-regression`).
    case regression = 4
    /// The alert could not be delivered; the report was written all the same.
    case undeliveredNotification = 5
    /// Broken instrumentation found (`--fail-on-instrumentation`).
    case instrumentation = 6
}
