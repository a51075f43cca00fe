import Foundation
public import LibPQ

/// Which implementation `analytics.window_funnel` and the masks' aggregates
/// `funnel_report` counts with (`window_funnel_masks`,
/// `window_funnel_chain_masks`) run on: the C extension `onramp_funnel`
/// (extensions/onramp_funnel) where the server has it, the PL/pgSQL of
/// migrations 016, 017 and 028 where it has not. The aggregates keep their
/// names, arguments and grants either way, so no caller changes; only their
/// support functions do. Run by every `onramp migrate`, after the
/// migrations: installing the extension later and migrating again switches
/// to it (docs/operations.md).
public enum FunnelAggregates {
    /// The extension's name, as `CREATE EXTENSION` takes it.
    public static let extensionName = "onramp_funnel"

    public enum Implementation: Sendable, Equatable {
        /// The C aggregates of the extension at this version.
        case native(version: String)
        /// The PL/pgSQL aggregates, and why not the native ones.
        case fallback(reason: String)
    }

    /// Creates the extension when the server has it and the database has it
    /// not, then points the three aggregates at its functions; leaves the
    /// PL/pgSQL ones, saying why, otherwise. `extension` is the extension's
    /// name (a test names a missing one to see the fallback). On Citus, run
    /// after the schema is distributed: Citus creates the extension on the
    /// workers too.
    public static func install(_ connection: Connection, extension name: String = extensionName) throws -> Implementation {
        // Before migration 016 there is nothing to point at the extension (a test migrating part way).
        guard try connection.query("SELECT to_regprocedure('analytics.window_funnel(interval, timestamptz, boolean[])') IS NOT NULL")
            .scalar(Bool.self)
        else { return .fallback(reason: "analytics.window_funnel is not made yet") }
        func installedVersion() throws -> String? {
            try connection.query("SELECT extversion FROM pg_extension WHERE extname = $1", [.text(name)]).rows.first
                .map { try $0.decode(String.self, at: 0) }
        }
        var version = try installedVersion()
        if version == nil {
            guard try !connection.query("SELECT 1 FROM pg_available_extensions WHERE name = $1", [.text(name)]).rows.isEmpty else {
                return .fallback(
                    reason: "the PostgreSQL extension \(name) is not installed on this server "
                        + "(build and install it with postgresql-server-dev-15: make -C extensions/onramp_funnel install, on every node)")
            }
            do {
                try connection.transaction { c in
                    // The name is one of two constants, never input: CREATE EXTENSION takes no parameters.
                    try c.executeScript("CREATE EXTENSION IF NOT EXISTS \(quoteIdentifier(name))")
                }
            } catch let error as PostgresError {
                return .fallback(reason: "CREATE EXTENSION \(name) failed: \(error.message)")
            }
            version = try installedVersion()
        }
        try connection.transaction { c in try c.executeScript(useNative) }
        return .native(version: version ?? "")
    }

    /// The support function an aggregate (a `regprocedure`'s text, such as
    /// `analytics.window_funnel(interval, timestamptz, boolean[])`) runs on:
    /// `window_funnel_native_add` when native, `window_funnel_add` when not.
    public static func transitionFunction(_ connection: Connection, of aggregate: String) throws -> String {
        try connection.query(
            "SELECT p.proname FROM pg_aggregate g JOIN pg_proc p ON p.oid = g.aggtransfn WHERE g.aggfnoid = $1::regprocedure",
            [.text(aggregate)]
        ).scalar(String.self)
    }

    static func quoteIdentifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Each aggregate not yet on the native functions is made again on them,
    /// with the grants it had. Idempotent: a second run changes nothing.
    static let useNative = """
        DO $$
        DECLARE
            a record;
            old regprocedure;
            made regprocedure;
            acl aclitem[];
            r record;
        BEGIN
            FOR a IN SELECT * FROM (VALUES
                ('window_funnel', 'interval, timestamptz, VARIADIC boolean[]', 'interval, timestamptz, boolean[]',
                 'window_funnel_native_add', 'window_funnel_native_level'),
                ('window_funnel_masks', 'interval, timestamptz, bigint, integer', 'interval, timestamptz, bigint, integer',
                 'window_funnel_native_add_mask', 'window_funnel_native_level'),
                ('window_funnel_chain_masks', 'interval, timestamptz, bigint, integer', 'interval, timestamptz, bigint, integer',
                 'window_funnel_native_add_mask', 'window_funnel_native_chain')) AS v(name, args, signature, sfunc, ffunc)
            LOOP
                old := to_regprocedure(format('analytics.%I(%s)', a.name, a.signature));
                -- Only what the migrations made: one not yet made is made by its own migration.
                IF old IS NULL THEN
                    CONTINUE;
                END IF;
                IF EXISTS (
                    SELECT 1 FROM pg_aggregate g JOIN pg_proc p ON p.oid = g.aggtransfn
                    WHERE g.aggfnoid = old AND p.proname = a.sfunc) THEN
                    CONTINUE;
                END IF;
                SELECT proacl INTO acl FROM pg_proc WHERE oid = old;
                EXECUTE format('DROP AGGREGATE %s', old);
                EXECUTE format(
                    'CREATE AGGREGATE analytics.%I(%s) (SFUNC = analytics.%I, STYPE = bytea, FINALFUNC = analytics.%I, '
                    'COMBINEFUNC = analytics.window_funnel_native_combine, PARALLEL = SAFE)',
                    a.name, a.args, a.sfunc, a.ffunc);
                made := to_regprocedure(format('analytics.%I(%s)', a.name, a.signature));
                IF acl IS NOT NULL THEN
                    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', made);
                    FOR r IN SELECT DISTINCT x.grantee FROM aclexplode(acl) AS x
                             WHERE x.privilege_type = 'EXECUTE' AND x.grantee <> x.grantor LOOP
                        IF r.grantee = 0 THEN
                            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', made);
                        ELSE
                            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', made, r.grantee::regrole);
                        END IF;
                    END LOOP;
                END IF;
            END LOOP;
        END
        $$
        """
}
