public import LibPQ

/// An app's messages as the server stored them, with the columns
/// `analytics.events` has (`message_id`, `timestamp` and `received_at`
/// among them), in the order the server received them (docs/lifecycle.md):
/// what `onramp export` writes. Read through `analytics.events`, so a login
/// exports only the apps it is granted (docs/access.md), and by `COPY … TO
/// STDOUT`, streamed in chunks: memory stays flat whatever the range.
public struct EventExport: Sendable {
    public enum Format: String, Sendable, CaseIterable {
        /// One JSON object per line.
        case jsonl
        /// A header of column names, then a row per message; JSON columns as their JSON text.
        case csv
    }

    public var app: String
    /// Received at or after this instant (microseconds since the epoch); nil: from the first.
    public var from: Int64?
    /// Received before this instant; nil: up to the last.
    public var until: Int64?
    public var format: Format

    public init(app: String, from: Int64? = nil, until: Int64? = nil, format: Format = .jsonl) {
        self.app = app
        self.from = from
        self.until = until
        self.format = format
    }

    /// Why nothing was exported, worded for the operator.
    public struct Refused: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    /// The messages' rows, bounded by settings of the transaction
    /// (`set_config`): `COPY` takes no parameters, and no value from the
    /// command line is ever part of the statement. Each is read in a
    /// subquery: on Citus the coordinator reads it, as the workers know no such setting.
    static func statement(_ format: Format) -> String {
        let rows = """
            FROM analytics.events e
            WHERE e.app = (SELECT current_setting('onramp.export_app'))
              AND e.received_at >= (SELECT current_setting('onramp.export_from')::timestamptz)
              AND e.received_at < (SELECT current_setting('onramp.export_until')::timestamptz)
            ORDER BY e.received_at, e.seq
            """
        // Text rows, each made a JSON object (`JSONLines`) or a CSV record (`CSVLines`) here.
        return "COPY (SELECT e.* \(rows)) TO STDOUT"
    }

    /// Streams the export on `c` (in a transaction of its own) to `write`,
    /// chunk by chunk; returns the messages written. An app the login reads
    /// no event of is refused, naming it.
    public func run(_ c: Connection, write: (UnsafeRawBufferPointer) throws -> Void) throws -> Int {
        try c.transaction(isolation: .repeatableRead) { c in
            guard try c.query("SELECT EXISTS (SELECT 1 FROM analytics.event_log WHERE app = $1)", [.text(app)]).scalar(Bool.self) else {
                throw Refused(description: "app: no event of app '\(app)' that this login may read (an unknown app, or one it is not granted: docs/access.md)")
            }
            // The log's statements are planned for millions of rows; compiling them took longer than running them.
            // The rows are sorted by receipt in memory: a month of an app sorted on disk was a sixth of its export.
            try c.query(
                """
                SELECT set_config('jit', 'off', true), set_config('work_mem', '256MB', true), set_config('onramp.export_app', $1, true),
                       set_config('onramp.export_from', $2, true), set_config('onramp.export_until', $3, true)
                """,
                [.text(app), .text(Timestamps.format(microseconds: from ?? Self.firstInstant)),
                 .text(Timestamps.format(microseconds: until ?? Self.lastInstant))])
            try c.query("SELECT set_config('datestyle', 'ISO, YMD', true)")
            var fields: [Range<Int>] = [], record: [UInt8] = [], scratch: [UInt8] = []
            func each(_ make: (UnsafeRawBufferPointer, inout [UInt8]) throws -> Void) throws -> Int {
                try c.copyOutCounting(Self.statement(format)) { row in
                    record.removeAll(keepingCapacity: true)
                    try make(UnsafeRawBufferPointer(rebasing: row[0..<(row.last == 10 ? row.count - 1 : row.count)]), &record)
                    try record.withUnsafeBytes { try write($0) }
                }.rows
            }
            let columns = try Self.columns(c)
            switch format {
            case .jsonl:
                let lines = JSONLines(columns: columns)
                return try each { try lines.append($0, fields: &fields, to: &$1) }
            case .csv:
                let lines = CSVLines(columns: columns)
                try lines.header.withUnsafeBytes { try write($0) }
                return try each { try lines.append($0, fields: &fields, scratch: &scratch, to: &$1) }
            }
        }
    }

    /// A column of what is exported, as PostgreSQL names its type.
    struct Column: Sendable {
        var name: String
        var type: String
    }

    /// The columns `analytics.events` has, in order: what either format writes.
    static func columns(_ c: Connection) throws -> [Column] {
        try c.query(
            """
            SELECT attname, format_type(atttypid, NULL) FROM pg_attribute
            WHERE attrelid = 'analytics.events'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum
            """
        ).rows.map { Column(name: try $0.decode(String.self, at: 0), type: try $0.decode(String.self, at: 1)) }
    }

    /// The first instant of year 1 and of year 10000: no message is received outside them.
    static let firstInstant: Int64 = -62_135_596_800_000_000
    static let lastInstant: Int64 = 253_402_300_800_000_000
}
