package import LibPQ

/// A count taken from every event of a whole history read as it streams
/// past (the event catalogue: docs/tracking-health.md), so that what needs
/// each event once reads the log together with the persons' histories.
package protocol HistoryTally {
    /// Expressions over `e` the read appends to each row, after its own
    /// columns: fixed SQL, never built from input.
    var columns: [String] { get }

    /// Binds what `columns` read, for the read's transaction on `c`.
    func bind(_ c: Connection) throws

    /// Counts one event. `fields` are the byte ranges in `row` (COPY
    /// text, escapes in place) of the read's columns: the user id, the
    /// anonymous id, the message id, the type, the event, the timestamp,
    /// one per path of the reader (`PersonHistoryReader.paths`), then one
    /// per entry of `columns`.
    mutating func count(_ row: UnsafeRawBufferPointer, fields: [Range<Int>]) throws
}

/// Nothing counted: a history read alone.
package struct NoTally: HistoryTally {
    package init() {}
    package var columns: [String] { [] }
    package func bind(_ c: Connection) throws {}
    package func count(_ row: UnsafeRawBufferPointer, fields: [Range<Int>]) throws {}
}
