-- 032: old months of the log archived to files and restored (docs/lifecycle.md).
--
-- `onramp archive run` writes a month partition to gzip files with a
-- manifest, reads them back, and only then records the month here and drops
-- the partition, in one transaction. `onramp archive restore` appends the
-- month's messages back and takes the month out of archived_months. Each
-- change is recorded per app in archive_changes, which the explorer counts
-- (as it counts erasures) to clear its store for the apps a change touched.

CREATE TABLE archived_months (
    month           date        PRIMARY KEY CHECK (month = date_trunc('month', month)::date),
    directory       text        NOT NULL,
    manifest_sha256 text        NOT NULL,
    messages        bigint      NOT NULL,
    archived_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE archive_changes (
    id       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    month    date        NOT NULL,
    app      text        NOT NULL,
    change   text        NOT NULL CHECK (change IN ('archived', 'restored')),
    messages bigint      NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);

-- For analysts: which months of the granted apps left the log, and came back.
CREATE VIEW analytics_internal.archive_changes AS
SELECT c.app, c.month, c.change, c.messages, c.at FROM archive_changes c;

CREATE VIEW analytics.archive_changes WITH (security_barrier) AS
SELECT * FROM analytics_internal.archive_changes
WHERE (SELECT public.onramp_reads_every_app()) OR app = ANY ((SELECT public.onramp_granted_apps())::text[]);
GRANT SELECT ON analytics.archive_changes TO onramp_analyst, onramp_operator, onramp_reader;

-- The month partition of `month` (its first day), by the name the server
-- gives it: events_yYYYYmMM. NULL when there is none.
CREATE FUNCTION onramp_month_partition(month date) RETURNS regclass
LANGUAGE sql STABLE AS $$
    SELECT c.oid::regclass FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'events'::regclass AND c.relname = format('events_y%sm%s', to_char(month, 'YYYY'), to_char(month, 'MM'))
$$;

-- Detaches and drops the month's partition once the archive has read it
-- back (onramp archive run), in the caller's transaction; false when it is gone already.
CREATE FUNCTION onramp_drop_month_partition(month date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    partition regclass := onramp_month_partition(month);
BEGIN
    IF partition IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('ALTER TABLE events DETACH PARTITION %s', partition);
    EXECUTE format('DROP TABLE %s', partition);
    RETURN true;
END $$;

-- Makes the month's partition again, for a restore (onramp archive
-- restore); false when it is there already.
CREATE FUNCTION onramp_create_month_partition(month date) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF onramp_month_partition(month) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format(
        'CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
        format('events_y%sm%s', to_char(month, 'YYYY'), to_char(month, 'MM')),
        (month::timestamp AT TIME ZONE 'UTC'), ((month + interval '1 month')::timestamp AT TIME ZONE 'UTC'));
    RETURN true;
END $$;
REVOKE ALL ON FUNCTION onramp_month_partition(date), onramp_drop_month_partition(date), onramp_create_month_partition(date) FROM PUBLIC;

-- A funnel whose definition changed while some of its cohort days were
-- frozen (docs/funnels.md, "Archived history"): those days keep the rows
-- computed under the definition recorded here, which the report names.
CREATE TABLE funnel_frozen_definitions (
    funnel        text        PRIMARY KEY,
    frozen_before date        NOT NULL,
    definition    jsonb       NOT NULL,
    recorded_at   timestamptz NOT NULL DEFAULT now()
);
