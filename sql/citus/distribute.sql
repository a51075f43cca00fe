-- Onramp on Citus: how the schema distributes (docs/scaling.md). `onramp
-- migrate` runs this after the numbered migrations when the database has the
-- citus extension; each step is skipped when already done, so it runs again
-- safely.
--
-- The migrations before it run with DDL propagation off: they create every
-- table, view and function on the coordinator, as on one PostgreSQL (one of
-- them creates a function as a role that may not log in, which Citus would
-- log in as to copy it to the workers). Then the large per-person tables are
-- distributed here, and Citus copies what they depend on (functions, the
-- sequence, the roles granted on them) to the workers.

-- The guard on counts (docs/access.md, "Counts") asks whether a login
-- reads every app as an instrumented plan starts, a shard's among them where
-- the coordinator runs one itself: reading the grants' reference table there
-- is a nested distributed execution, which Citus refuses unless the function
-- allows it. First, and once: Citus refuses to alter a distributed function
-- in a transaction that has run a parallel operation.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_proc WHERE oid = 'onramp_reads_every_app(name)'::regprocedure
                   AND 'citus.allow_nested_distributed_execution=on' = ANY (coalesce(proconfig, '{}'))) THEN
        ALTER FUNCTION onramp_reads_every_app(name) SET citus.allow_nested_distributed_execution = on;
    END IF;
END
$$;

-- The log's distribution column: a device's history on one shard. Citus
-- refuses a generated column and routes a row before any trigger runs, so the
-- append sets it (coalesce(anonymous_id, user_id), as the events' check
-- constraint guarantees one of them).
ALTER TABLE events ADD COLUMN IF NOT EXISTS person_key text;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM events WHERE person_key IS NULL LIMIT 1) THEN
        RAISE EXCEPTION 'events has rows without person_key: distribute an empty log (a log moves to Citus by a copy into a new database)';
    END IF;
END
$$;

-- One connection per node for the whole transaction: Citus copies a function
-- to the workers (below) only in a transaction that has not opened several.
-- It makes distributing an empty log a little slower, once.
SET LOCAL citus.multi_shard_modify_mode = 'sequential';

-- The append-only triggers stay: each only raises, on the shard it fires on,
-- and touches no other shard, which is what Citus's "unsafe triggers" warns of.
SET LOCAL citus.enable_unsafe_triggers = on;

DO $$
DECLARE
    spec record;
BEGIN
    FOR spec IN
        SELECT * FROM (VALUES
            (1, 'events', 'person_key', 'default'),
            -- The ledger by message id: an append's group commit spans shards
            -- and Citus commits it in two phases, so dedupe stays one unique key.
            (2, 'event_ids', 'message_id', 'none'),
            -- A person's outcomes together, hashed as the log is.
            (3, 'funnel_persons', 'person_id', 'events'),
            (4, 'funnel_person_diagnostics', 'person_id', 'events'),
            (5, 'funnel_person_retention', 'person_id', 'events')
        ) AS t(ord, relation, distribution_column, colocate_with)
        ORDER BY ord
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = spec.relation::regclass) THEN
            PERFORM create_distributed_table(spec.relation, spec.distribution_column, colocate_with => spec.colocate_with);
        END IF;
    END LOOP;
    -- A copy on every node. The write keys: read by every server at each
    -- key lookup. The identity links: every view that names an event's
    -- person joins the log to them by anonymous id, which is not the log's
    -- distribution column (the device's first id, the user id when there is
    -- no anonymous one); Citus joins a distributed table only to a reference
    -- table or on its distribution column.
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'write_keys'::regclass) THEN
        PERFORM create_reference_table('write_keys');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'identity_links'::regclass) THEN
        PERFORM create_reference_table('identity_links');
    END IF;
    -- The grants, where the workers check them (below).
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'app_grants'::regclass) THEN
        PERFORM create_reference_table('app_grants');
    END IF;
END
$$;

-- The analysts' functions run on the workers too, inside the queries Citus
-- sends to the shards: copies there (they were made on the coordinator only).
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = 'analytics'::regnamespace
          AND NOT EXISTS (SELECT 1 FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid)
          -- An extension's functions (onramp_funnel's) go with the extension:
          -- distributing an aggregate made of them creates it on the workers.
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
        -- Functions before the aggregates made of them, each in the order
        -- made. In pg_proc's own order a function a later migration replaced
        -- (window_funnel_level, 028) came after the aggregates using it, and
        -- its copy failed on the workers: schema "analytics" does not exist.
        ORDER BY p.prokind = 'a', p.oid
    LOOP
        PERFORM create_distributed_function(f);
    END LOOP;
END
$$;

-- Citus checks a query's shards as the user who sent it, not as the owner of
-- the view it went through (unlike PostgreSQL): the analysts' roles read the
-- distributed tables the `analytics` views read. They hold nothing those
-- views do not show; the keys, the ledger and the privacy tables stay closed.
GRANT SELECT ON events, identity_links, funnel_persons, funnel_person_diagnostics, funnel_person_retention
    TO onramp_analyst, onramp_operator, onramp_reader;

-- So those tables apply the grants themselves (docs/access.md), on the
-- workers, where Citus runs the shards' queries as the role the
-- coordinator's session runs as, and where a view's filter arrives as a
-- plain condition (the security barrier stays on the coordinator). Row-level
-- security there makes the grant a security condition again, run before
-- any of the query's own, for a query through a view and for one that
-- reads the table. A worker's role OIDs are its own: it checks the grant by
-- the login's name (a role renamed, or dropped and made again under its
-- name, until `onramp access` clears its rows, would hold the old one's
-- grants there). The owner, which runs the job, is exempt as the tables'
-- owner; the server and erasure read and write as before.
-- The apps granted to the role the node sees, or NULL for every app, from
-- the grants' copy on the node (a reference table, hence the nested
-- execution). Citus refuses a subquery in a policy, and a stable function
-- there is called per row: 45 µs a row, 40 times the scan (measured). So it
-- is declared immutable, which it is not: PostgreSQL works it out once
-- when it plans a shard's query, and the plan holds the apps as they were
-- then. Each statement is planned afresh, but for a prepared statement,
-- whose plan keeps a revoked app until it is prepared again
-- (docs/access.md). Made once: replacing a distributed function after this
-- script's parallel grants is refused.
DO $$
BEGIN
    IF to_regprocedure('public.onramp_role_apps()') IS NULL THEN
        CREATE FUNCTION onramp_role_apps() RETURNS text[]
        LANGUAGE sql IMMUTABLE SECURITY DEFINER
        SET search_path = pg_catalog, public, pg_temp SET citus.allow_nested_distributed_execution = on AS $f$
            SELECT CASE WHEN bool_or(g.app IS NULL) THEN NULL ELSE coalesce(array_agg(g.app), '{}') END
            FROM app_grants g WHERE g.login_name = session_user
        $f$;
    END IF;
END
$$;
DO $$
DECLARE
    t text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = 'onramp_role_apps()'::regprocedure) THEN
        PERFORM create_distributed_function('onramp_role_apps()');
    END IF;
    FOREACH t IN ARRAY ARRAY['events', 'identity_links', 'funnel_persons', 'funnel_person_diagnostics', 'funnel_person_retention'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        -- The analysts' roles and their members: the rows of the apps granted
        -- to the role the worker sees (every row for an every-app grant).
        IF NOT EXISTS (SELECT 1 FROM pg_policies WHERE schemaname = 'public' AND tablename = t AND policyname = 'granted_apps') THEN
            EXECUTE format(
                'CREATE POLICY granted_apps ON %I FOR SELECT TO onramp_analyst, onramp_operator, onramp_reader '
                'USING (app = ANY (coalesce(onramp_role_apps(), ARRAY[app])))', t);
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_policies WHERE schemaname = 'public' AND tablename = t AND policyname = 'server_and_erasure') THEN
            EXECUTE format('CREATE POLICY server_and_erasure ON %I TO onramp_writer, onramp_privacy USING (true) WITH CHECK (true)', t);
        END IF;
    END LOOP;
END
$$;

-- The apps with events: on one PostgreSQL a recursive walk of the log's
-- index, which Citus cannot run over shards; here each shard's distinct apps.
-- Replaced behind analytics.apps, which keeps the login's apps alone
-- (docs/access.md).
CREATE OR REPLACE VIEW analytics_internal.apps AS SELECT DISTINCT app FROM events;

-- A group commit holds many devices' events, so it writes to every shard of
-- the log, and Citus copies an append's rows to each shard over a
-- connection of its own. It keeps one connection to each worker open between
-- transactions by default, so every commit opened and closed one to each of
-- the other shards, a third of the append's time (docs/scaling.md,
-- "Measured"). Each session of this database keeps as many connections to a
-- worker as the log has shards there; set again by each migrate, after shards
-- or workers change.
DO $$
DECLARE
    per_worker integer;
BEGIN
    SELECT ceil(count(*)::numeric / greatest(1, (SELECT count(*) FROM pg_dist_node
                                                  WHERE noderole = 'primary' AND shouldhaveshards AND groupid <> 0)))
    INTO per_worker
    FROM pg_dist_shard WHERE logicalrelid = 'events'::regclass;
    EXECUTE format('ALTER DATABASE %I SET citus.max_cached_conns_per_worker = %s', current_database(), greatest(per_worker, 1));
END
$$;

-- An erasure (`onramp privacy erase`) deletes from the log's shards as the
-- role its function runs as, onramp_privacy, and Citus logs in to the
-- workers as that role to do it: it may log in on the workers, and only
-- there. On the coordinator nobody logs in as it, and the function stays its
-- one way in; the workers' pg_hba.conf should let it in from the coordinator
-- alone (docs/scaling.md). A worker added later gets the role as the
-- coordinator has it, so migrate runs again after adding one.
DO $$
DECLARE
    refused text;
BEGIN
    SELECT string_agg(nodename || ':' || nodeport || ': ' || result, '; ') INTO refused
    FROM run_command_on_workers(
        $cmd$SET citus.enable_ddl_propagation = off; ALTER ROLE onramp_privacy LOGIN; RESET citus.enable_ddl_propagation$cmd$)
    WHERE NOT success;
    IF refused IS NOT NULL THEN
        RAISE EXCEPTION 'could not let onramp_privacy log in on the workers: %', refused;
    END IF;
END
$$;
