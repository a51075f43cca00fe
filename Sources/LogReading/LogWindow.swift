package import LibPQ

/// The events a run reads as new: those its snapshot (`to`) counts as
/// committed and the last run's (`from`) did not. Bounded on both sides, so
/// that consecutive runs read every committed row exactly once even when the
/// rows are read under a later snapshot than `to`, as on Citus, where each
/// worker takes its own when first read (docs/scaling.md, "The job's cursor
/// on Citus"). On one PostgreSQL the upper bound selects nothing the run's
/// snapshot would not already hide.
package struct LogWindow: Equatable, Sendable {
    package var from: Checkpoint
    package var to: Checkpoint

    package init(from: Checkpoint, to: Checkpoint) {
        self.from = from
        self.to = to
    }

    /// Everything committed up to `to`.
    package static func upTo(_ to: Checkpoint) -> LogWindow { LogWindow(from: .start, to: to) }

    /// SQL condition over `e` selecting the window `bind` set for the
    /// transaction (a COPY takes no parameters). The lower bound lets the
    /// BRIN index skip everything older, the upper one everything newer,
    /// with the bound values as the scan's runtime parameters.
    package static let condition = """
        e.txid >= (SELECT current_setting('onramp.window_low')::int8)
        AND e.txid < (SELECT current_setting('onramp.window_high')::int8)
        AND (e.txid >= (SELECT current_setting('onramp.window_from_horizon')::int8)
             OR e.txid IN (SELECT unnest(current_setting('onramp.window_from_pending')::int8[])))
        AND e.txid NOT IN (SELECT unnest(current_setting('onramp.window_to_pending')::int8[]))
        """

    /// Binds the window for `condition`, for the rest of the transaction:
    /// settings, not a temp table, so a read-only transaction on a replica
    /// can bind it too.
    package func bind(_ c: Connection) throws {
        try c.query(
            """
            SELECT set_config('onramp.window_low', $1::text, true), set_config('onramp.window_high', $2::text, true),
                   set_config('onramp.window_from_horizon', $3::text, true),
                   set_config('onramp.window_from_pending', $4::int8[]::text, true),
                   set_config('onramp.window_to_pending', $5::int8[]::text, true)
            """,
            [.int(min(from.horizon, from.pending.min() ?? from.horizon)), .int(to.horizon), .int(from.horizon),
             .intArray(from.pending), .intArray(to.pending)])
    }
}
