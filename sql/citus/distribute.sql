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
            -- A device's identity link beside the device's events.
            (3, 'identity_links', 'anonymous_id', 'events'),
            -- A person's outcomes together, hashed as the log is.
            (4, 'funnel_persons', 'person_id', 'events'),
            (5, 'funnel_person_diagnostics', 'person_id', 'events'),
            (6, 'funnel_person_retention', 'person_id', 'events')
        ) AS t(ord, relation, distribution_column, colocate_with)
        ORDER BY ord
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = spec.relation::regclass) THEN
            PERFORM create_distributed_table(spec.relation, spec.distribution_column, colocate_with => spec.colocate_with);
        END IF;
    END LOOP;
    -- Read by every server at each key lookup: a copy on every node.
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'write_keys'::regclass) THEN
        PERFORM create_reference_table('write_keys');
    END IF;
END
$$;
