import LibPQ

/// A run's rewrite of the cohort days, every funnel's together: each day
/// table loses the rows of the days rewritten in one statement and gets
/// their new rows in one COPY, so the statements do not multiply with the
/// funnels as they would with each funnel deleting and copying its own.
/// Funnels only ever read their own days' rows (`WHERE funnel = $1`), so
/// each funnel's reads come before its writes however late the writes are
/// sent.
struct DayTableWrites {
    /// Table -> the funnels and cohort days (side by side) whose rows go; tables in first-named order.
    private var deletes: [(table: String, funnels: [String], days: [String])] = []
    /// COPY statement -> its rows, text or binary; statements in first-named order.
    private var text: [(statement: String, rows: CopyRows)] = []
    private var binary: [(statement: String, rows: BinaryCopyRows)] = []

    /// Removes `funnel`'s rows of `days` from `table` (the code's own name, never input).
    mutating func delete(from table: String, funnel: String, days: [String]) {
        guard !days.isEmpty else { return }
        let index = deletes.firstIndex { $0.table == table } ?? {
            deletes.append((table, [], []))
            return deletes.count - 1
        }()
        deletes[index].funnels += Array(repeating: funnel, count: days.count)
        deletes[index].days += days
    }

    /// Adds rows, in COPY's text form, to `statement` (`COPY … FROM STDIN`).
    mutating func copy(_ statement: String, _ body: (inout CopyRows) throws -> Void) rethrows {
        try Self.add(to: &text, statement, empty: CopyRows(), body)
    }

    /// Adds rows, in COPY's binary form, to `statement` (`… FROM STDIN (FORMAT binary)`).
    mutating func copy(binary statement: String, _ body: (inout BinaryCopyRows) throws -> Void) rethrows {
        try Self.add(to: &binary, statement, empty: BinaryCopyRows(), body)
    }

    private static func add<Rows>(
        to list: inout [(statement: String, rows: Rows)], _ statement: String, empty: Rows, _ body: (inout Rows) throws -> Void
    ) rethrows {
        if let index = list.firstIndex(where: { $0.statement == statement }) {
            try body(&list[index].rows)
        } else {
            var rows = empty
            try body(&rows)
            list.append((statement, rows))
        }
    }

    /// Sends the deletes, then the COPYs, on `c`.
    func write(_ c: Connection) throws {
        for delete in deletes {
            try c.query(
                """
                DELETE FROM \(delete.table) t USING unnest($1::text[], $2::date[]) AS d(funnel, cohort_day)
                WHERE t.funnel = d.funnel AND t.cohort_day = d.cohort_day
                """, [.textArray(delete.funnels), .textArray(delete.days)])
        }
        for (statement, rows) in text where rows.rowCount > 0 { try c.copyIn(statement) { try $0.write(rows) } }
        for (statement, rows) in binary where rows.rowCount > 0 { try c.copyIn(statement) { try $0.write(rows) } }
    }
}
