public import LibPQ

/// A rejected message on its way to `quarantine`.
public struct QuarantineEntry: Sendable, Hashable {
    public var app: String?
    public var receivedAt: Int64
    public var rejection: Rejection

    public init(app: String?, receivedAt: Int64, rejection: Rejection) {
        self.app = app
        self.receivedAt = receivedAt
        self.rejection = rejection
    }
}

/// What an append did with one message.
public enum AppendOutcome: Sendable, Hashable {
    case stored
    /// Already in the log, earlier in the same append, or erased (docs/privacy.md).
    case duplicate
    /// Carries an id kept out by an erasure: answered, not stored.
    case suppressed
}

/// Appends to the event log, exactly once per `(app, messageId)`, forever.
///
/// One call is one transaction and two statements, whatever the number of
/// events: the quarantine rows, then the events, passed as parallel `text[]`
/// parameters and expanded with `unnest`. The events statement inserts into the
/// `event_ids` ledger with `ON CONFLICT DO NOTHING` and writes to `events` only
/// the rows the ledger accepted (`RETURNING`), so an event and its ledger row
/// land together or not at all, and concurrent writers (other server
/// instances) cannot both store one message.
public enum EventStore {
    /// For each input event, what became of it.
    public static func append(
        _ events: [NewEvent], quarantine: [QuarantineEntry], layout: EventLogLayout = .single, on connection: Connection
    ) throws -> [AppendOutcome] {
        try connection.transaction { c in
            try insertQuarantine(quarantine, on: c)
            return try insertEvents(events, layout: layout, on: c)
        }
    }

    /// Same as `append`, but without opening a transaction: for callers that
    /// hold one already.
    public static func insertEvents(
        _ events: [NewEvent], layout: EventLogLayout = .single, on connection: Connection
    ) throws -> [AppendOutcome] {
        guard !events.isEmpty else { return [] }
        struct Key: Hashable {
            let app: String
            let id: String
        }
        // Duplicates inside the input are resolved here: the first one is the candidate.
        var firstIndex: [Key: Int] = [:]
        var unique: [NewEvent] = []
        for (i, event) in events.enumerated() {
            let key = Key(app: event.app, id: event.messageID)
            if firstIndex[key] == nil {
                firstIndex[key] = i
                unique.append(event)
            }
        }
        func column(_ f: (NewEvent) -> String) -> PostgresValue { .textArray(unique.map(f)) }
        func time(_ us: Int64?) -> String { us.map { Timestamps.format(microseconds: $0) } ?? "" }
        let parameters: [PostgresValue] = [
            column(\.app), column(\.type.rawValue), column(\.messageID), column { $0.event ?? "" },
            column { $0.anonymousID ?? "" }, column { $0.userID ?? "" }, column { time($0.timestamp) },
            column { time($0.originalTimestamp) }, column { time($0.sentAt) }, column { time($0.receivedAt) },
            column(\.properties), column(\.context), column { $0.traits ?? "" }, column { $0.previousID ?? "" },
            column { $0.groupID ?? "" },
        ]
        let stored = try connection.query(layout == .single ? appendSQL : distributedAppendSQL, parameters)
        var answered: [Key: AppendOutcome] = [:]
        for row in stored.rows {
            let key = Key(app: try row.decode(String.self, at: 0), id: try row.decode(String.self, at: 1))
            answered[key] = try row.decode(Bool.self, at: 2) ? .suppressed : .stored
        }
        return events.enumerated().map { i, event in
            let key = Key(app: event.app, id: event.messageID)
            guard firstIndex[key] == i else { return .duplicate }
            return answered[key] ?? .duplicate
        }
    }

    /// Rejected messages, every text made storable (`Storable.text`).
    public static func insertQuarantine(_ entries: [QuarantineEntry], on connection: Connection) throws {
        guard !entries.isEmpty else { return }
        // What the client sent may hold what text cannot (a NUL in a messageId,
        // say): escaped, never a reason to fail the commit.
        func text(_ value: (QuarantineEntry) -> String) -> PostgresValue { .textArray(entries.map { Storable.text(value($0)) }) }
        let parameters: [PostgresValue] = [
            text { $0.app ?? "" },
            .textArray(entries.map { Timestamps.format(microseconds: $0.receivedAt) }),
            .textArray(entries.map { String($0.rejection.index) }),
            text { $0.rejection.messageID ?? "" },
            text(\.rejection.code),
            text(\.rejection.message),
            text(\.rejection.raw),
            .textArray(entries.map { $0.rejection.userID ?? "" }),
            .textArray(entries.map { $0.rejection.anonymousID ?? "" }),
            .textArray(entries.map { $0.rejection.previousID ?? "" }),
            .textArray(entries.map { _ in "" }),
        ]
        // A message of a suppressed person is not kept here either (by its own ids).
        try connection.query(
            """
            WITH input AS (
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
                    WITH ORDINALITY AS t(app, received_at, batch_index, message_id, reason_code, reason, raw, ord)
            )
            INSERT INTO quarantine (app, received_at, batch_index, message_id, reason_code, reason, raw)
            SELECT NULLIF(i.app, ''), i.received_at::timestamptz, i.batch_index::integer, NULLIF(i.message_id, ''),
                   i.reason_code, i.reason, i.raw
            FROM input i
            LEFT JOIN onramp_kept_out($1::text[], $8::text[], $9::text[], $10::text[], $4::text[], $11::text[]) k ON k.ord = i.ord
            WHERE NOT coalesce(k.suppressed, false)
            """, parameters)
    }

    /// Creates the coming months' partitions (idempotent; the server calls it at start-up and daily).
    @discardableResult
    public static func ensurePartitions(on connection: Connection) throws -> Int {
        try connection.query("SELECT onramp_ensure_coming_partitions()").scalar(Int.self)
    }

    /// The ledger takes a message unless its id was erased or it carries a
    /// suppressed id (`onramp_kept_out`, docs/privacy.md: by keyed hash, for
    /// the apps that have erased anyone; three probes a statement for the
    /// others). Returns the stored messages (false) and the suppressed ones
    /// (true).
    static let appendSQL = appendSQL(distributed: false)
    static let distributedAppendSQL = appendSQL(distributed: true)

    /// On Citus the append also names each row's shard key (`person_key`, docs/scaling.md).
    static func appendSQL(distributed: Bool) -> String {
        let (keyColumn, keyValue) = distributed ? (", person_key", ", coalesce(NULLIF(i.anonymous_id, ''), NULLIF(i.user_id, ''))") : ("", "")
        return """
        WITH input AS (
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                                 $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
                                 $15::text[])
                WITH ORDINALITY AS t(app, type, message_id, event, anonymous_id, user_id, ts,
                                     original_ts, sent_at, received_at, properties, context, traits, previous_id, group_id, ord)
        ), checked AS (
            SELECT i.*, k.suppressed, k.erased
            FROM input i JOIN onramp_kept_out($1::text[], $6::text[], $5::text[], $14::text[], $3::text[], $8::text[]) k ON k.ord = i.ord
        ), accepted AS (
            INSERT INTO event_ids (app, message_id, seq, received_at)
            SELECT app, message_id, nextval('event_seq'), received_at::timestamptz FROM checked
            WHERE NOT suppressed AND NOT erased ORDER BY ord
            ON CONFLICT DO NOTHING
            RETURNING app, message_id, seq
        ), stored AS (
            INSERT INTO events (seq, app, type, message_id, event, anonymous_id, user_id, "timestamp",
                                original_timestamp, sent_at, received_at, properties, context, traits, previous_id, group_id\(keyColumn))
            SELECT a.seq, i.app, i.type, i.message_id, NULLIF(i.event, ''), NULLIF(i.anonymous_id, ''),
                   NULLIF(i.user_id, ''), i.ts::timestamptz, NULLIF(i.original_ts, '')::timestamptz,
                   NULLIF(i.sent_at, '')::timestamptz, i.received_at::timestamptz, i.properties::jsonb,
                   i.context::jsonb, NULLIF(i.traits, '')::jsonb, NULLIF(i.previous_id, ''), NULLIF(i.group_id, '')\(keyValue)
            FROM accepted a JOIN checked i ON i.app = a.app AND i.message_id = a.message_id
            ORDER BY a.seq
            RETURNING app, message_id
        )
        SELECT app, message_id, false FROM stored
        UNION ALL
        SELECT app, message_id, true FROM checked WHERE suppressed
        """
    }
}
