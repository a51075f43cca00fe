public import LibPQ

/// Keeps the counts of hidden rows from a login that reads some apps but not
/// all (docs/access.md, "Counts"). The views apply the grants, but
/// PostgreSQL may fetch a hidden app's rows through an index on the query's
/// own conditions before the views discard them, and two instruments report
/// what it fetched: `EXPLAIN ANALYZE`, and the scan counters of the
/// statistics views (`pg_stat_all_indexes.idx_tup_read`). So, where
/// the funnel extension is native:
/// - the extension's library is loaded as each session of the database
///   starts (`session_preload_libraries`), and refuses an instrumented plan
///   to such a login (extensions/onramp_funnel/explain_guard.c);
/// - the functions behind the row and block counters of tables, indexes
///   and the database are executable by the schema's owner and
///   `pg_monitor` only, not by every role.
/// Both take a superuser (the database's settings, `pg_catalog`'s grants);
/// run by one, `onramp migrate` makes them, and otherwise says what a
/// superuser runs.
public enum CountsGuard {
    public enum State: Sendable, Equatable {
        case on
        case off(reason: String)
    }

    /// The statistics functions that count the rows and blocks a scan read.
    static let counters = [
        // How many scans, of an index probed once per row a join fetched.
        "pg_stat_get_numscans(oid)", "pg_stat_get_xact_numscans(oid)",
        "pg_stat_get_tuples_returned(oid)", "pg_stat_get_tuples_fetched(oid)",
        "pg_stat_get_xact_tuples_returned(oid)", "pg_stat_get_xact_tuples_fetched(oid)",
        "pg_stat_get_blocks_fetched(oid)", "pg_stat_get_blocks_hit(oid)",
        "pg_stat_get_xact_blocks_fetched(oid)", "pg_stat_get_xact_blocks_hit(oid)",
        // The database's sums of the same, which a session sees grow with its own scans.
        "pg_stat_get_db_tuples_returned(oid)", "pg_stat_get_db_tuples_fetched(oid)",
        "pg_stat_get_db_blocks_fetched(oid)", "pg_stat_get_db_blocks_hit(oid)",
    ]

    /// Whether `list`, a list of libraries as a setting holds it (`"a", b`),
    /// names the library in `onramp.guard_library`.
    static func namesLibrary(_ list: String) -> String {
        #"\#(list) ~ ('(^|[ ,"])' || current_setting('onramp.guard_library') || '($|[ ,"])')"#
    }

    /// This database's and its roles' `session_preload_libraries` settings
    /// (`setrole` 0: the database's own; `setdatabase` 0: a role's in every
    /// database), with whether each names the library in `onramp.guard_library`.
    /// A role's own setting replaces the database's for its sessions.
    static let preloadSettings = """
        SELECT s.setrole, s.setdatabase, substr(c, strpos(c, '=') + 1) AS libraries,
               \(namesLibrary("substr(c, strpos(c, '=') + 1)")) AS names_it
        FROM pg_db_role_setting s, unnest(s.setconfig) AS c
        WHERE s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
          AND c LIKE 'session_preload_libraries=%'
        """

    /// Makes the guard when the migrating role may, and says whether it holds.
    /// `library` is the funnel extension's library, loaded at each session's start.
    public static func install(_ connection: Connection, library: String = FunnelAggregates.extensionName) throws -> State {
        if try holds(connection, library: library) { return .on }
        guard try connection.query("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").scalar(Bool.self) else {
            return .off(
                reason: "a superuser must load \(library) as each session starts and close the scan counters to other roles: "
                    + "run onramp migrate as a superuser once (docs/operations.md)")
        }
        try connection.transaction { c in
            try c.executeScript(
                """
                DO $$
                DECLARE
                    library text := current_setting('onramp.guard_library');
                    setting record;
                    counter regprocedure;
                    owner regrole := (SELECT nspowner FROM pg_namespace WHERE nspname = 'analytics')::regrole;
                BEGIN
                    IF NOT \(namesLibrary("current_setting('shared_preload_libraries')")) THEN
                        -- The database's setting, then every role's own that leaves the library out.
                        -- A setting is kept as its list's quoted names ("a", b): the library goes after them.
                        IF NOT EXISTS (SELECT 1 FROM (\(preloadSettings)) p WHERE p.setrole = 0 AND p.names_it) THEN
                            EXECUTE format('ALTER DATABASE %I SET session_preload_libraries = %s', current_database(),
                                concat_ws(', ', nullif((SELECT p.libraries FROM (\(preloadSettings)) p WHERE p.setrole = 0), ''),
                                          quote_ident(library)));
                        END IF;
                        FOR setting IN SELECT * FROM (\(preloadSettings)) p WHERE p.setrole <> 0 AND NOT p.names_it LOOP
                            EXECUTE format('ALTER ROLE %s %s SET session_preload_libraries = %s', setting.setrole::regrole,
                                CASE WHEN setting.setdatabase = 0 THEN '' ELSE format('IN DATABASE %I', current_database()) END,
                                concat_ws(', ', nullif(setting.libraries, ''), quote_ident(library)));
                        END LOOP;
                    END IF;
                    FOREACH counter IN ARRAY current_setting('onramp.guard_counters')::regprocedure[] LOOP
                        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', counter);
                        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO pg_monitor, %s', counter, owner);
                    END LOOP;
                END
                $$
                """)
        }
        return try holds(connection, library: library) ? .on : .off(reason: "the settings did not take")
    }

    /// The server's other databases every role may connect to (by default
    /// `postgres` and `template1`): there the database-wide counters of this
    /// one are readable, as `pg_stat_database` shows every database's.
    public static func databasesOpenToAll(_ connection: Connection) throws -> [String] {
        try connection.query(
            """
            SELECT datname::text FROM pg_database
            WHERE datallowconn AND datname <> current_database() AND has_database_privilege('public', oid, 'CONNECT')
            ORDER BY 1
            """
        ).rows.map { try $0.decode(String.self, at: 0) }
    }

    /// Whether new sessions of the database load `library` (the server's
    /// preloaded libraries, readable only with `pg_read_all_settings`, or the
    /// database's setting and no role's own without it), and the counters
    /// are closed to PUBLIC. Leaves `onramp.guard_library` and
    /// `onramp.guard_counters` set for the session, where `install`'s DO
    /// block, which takes no parameters, reads them.
    static func holds(_ connection: Connection, library: String) throws -> Bool {
        try connection.query(
            "SELECT set_config('onramp.guard_library', $1, false), set_config('onramp.guard_counters', $2, false)",
            [.text(library), .text("{" + counters.joined(separator: ",") + "}")])
        return try connection.query(
            """
            SELECT (\(namesLibrary(
                        "CASE WHEN pg_has_role(current_user, 'pg_read_all_settings', 'USAGE') THEN current_setting('shared_preload_libraries') ELSE '' END"))
                    OR (EXISTS (SELECT 1 FROM (\(preloadSettings)) p WHERE p.setrole = 0 AND p.names_it)
                        AND NOT EXISTS (SELECT 1 FROM (\(preloadSettings)) p WHERE p.setrole <> 0 AND NOT p.names_it)))
               AND NOT EXISTS (SELECT 1 FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) AS a
                               WHERE p.oid = ANY (current_setting('onramp.guard_counters')::regprocedure[]) AND a.grantee = 0)
            """
        ).scalar(Bool.self)
    }
}
