public import LibPQ

/// Where the log lives: one PostgreSQL, or distributed on Citus, where each
/// row carries its shard key (`person_key`, the device), which the append
/// must supply since Citus routes a row before any trigger or default could
/// (docs/scaling.md).
public enum EventLogLayout: Sendable, Hashable {
    case single
    case distributed

    /// The layout `onramp migrate` gave the database: distributed when the log has `person_key`.
    public static func read(_ connection: Connection) throws -> EventLogLayout {
        try connection.query(
            """
            SELECT EXISTS (SELECT 1 FROM pg_attribute
                           WHERE attrelid = to_regclass('events') AND attname = 'person_key' AND NOT attisdropped)
            """
        ).scalar(Bool.self) ? .distributed : .single
    }
}
