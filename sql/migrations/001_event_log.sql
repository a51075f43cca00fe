-- 001: the event log, its dedupe ledger, the quarantine and write keys.
--
-- The log is append-only and partitioned by month of received_at (server time,
-- never corrected), so whole old months can be detached and archived.
--
-- Exactly-once, forever: PostgreSQL can only enforce UNIQUE (app, message_id)
-- on a partitioned table if the partition key is in it, which would make a
-- message re-sent next month a "new" row. So the uniqueness lives in its own
-- unpartitioned ledger, event_ids, with no time window. An append inserts into
-- event_ids ... ON CONFLICT DO NOTHING and writes to events only the rows the
-- ledger accepted, in the same transaction: both land or neither does.
-- (On Citus, event_ids distributes by message_id and events by person.)

CREATE SEQUENCE event_seq AS bigint CACHE 1;

CREATE TABLE events (
    seq                bigint      NOT NULL DEFAULT nextval('event_seq'),
    app                text        NOT NULL,
    type               text        NOT NULL
        CHECK (type IN ('track', 'screen', 'identify', 'page', 'group', 'alias')),
    message_id         text        NOT NULL,
    event              text,                    -- track event name; screen/page name for screens
    anonymous_id       text,
    user_id            text,
    "timestamp"        timestamptz NOT NULL,    -- corrected for device clock skew
    original_timestamp timestamptz,             -- as the client sent it
    sent_at            timestamptz,
    received_at        timestamptz NOT NULL,
    properties         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    context            jsonb       NOT NULL DEFAULT '{}'::jsonb,
    traits             jsonb,
    -- The writing transaction's id: the nightly job reads rows by transaction
    -- horizon, not by seq, because seq order is not commit order.
    txid               bigint      NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    CHECK (anonymous_id IS NOT NULL OR user_id IS NOT NULL)
) PARTITION BY RANGE (received_at);

-- Cheap on append, good enough for range scans of monotonic columns.
CREATE INDEX events_brin ON events USING brin (txid, seq, received_at);
-- A person's whole history, for recomputing the persons a new event touches.
CREATE INDEX events_anonymous ON events (app, anonymous_id);
CREATE INDEX events_user ON events (app, user_id) WHERE user_id IS NOT NULL;

-- Catches rows outside every monthly partition, so an append never fails on it.
CREATE TABLE events_default PARTITION OF events DEFAULT;

CREATE TABLE event_ids (
    app         text        NOT NULL,
    message_id  text        NOT NULL,
    seq         bigint      NOT NULL,
    received_at timestamptz NOT NULL,
    PRIMARY KEY (app, message_id)
);

-- Monthly partitions named events_yYYYYmMM, created ahead of time by migrate,
-- by the server at start-up and daily. Idempotent.
CREATE FUNCTION onramp_ensure_event_partitions(months_behind integer DEFAULT 1, months_ahead integer DEFAULT 3)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    first_month date := date_trunc('month', now() AT TIME ZONE 'UTC')::date - make_interval(months => months_behind);
    month date;
    created integer := 0;
    partition_name text;
BEGIN
    FOR i IN 0 .. months_behind + months_ahead LOOP
        month := first_month + make_interval(months => i);
        partition_name := format('events_y%sm%s', to_char(month, 'YYYY'), to_char(month, 'MM'));
        IF to_regclass(partition_name) IS NULL THEN
            EXECUTE format(
                'CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
                partition_name, (month::timestamp AT TIME ZONE 'UTC'),
                ((month + interval '1 month')::timestamp AT TIME ZONE 'UTC'));
            created := created + 1;
        END IF;
    END LOOP;
    RETURN created;
END $$;

SELECT onramp_ensure_event_partitions(1, 3);

-- Nothing updates or deletes an event: the log is the source of truth.
CREATE FUNCTION onramp_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the event log is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'detach a whole month partition to archive old events';
END $$;

CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION onramp_append_only();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION onramp_append_only();
CREATE TRIGGER event_ids_append_only BEFORE UPDATE OR DELETE ON event_ids
    FOR EACH ROW EXECUTE FUNCTION onramp_append_only();
CREATE TRIGGER event_ids_no_truncate BEFORE TRUNCATE ON event_ids
    FOR EACH STATEMENT EXECUTE FUNCTION onramp_append_only();

-- Messages that failed validation, kept with their raw text and the reason,
-- so nothing a client sent is silently lost.
CREATE TABLE quarantine (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app          text,                     -- from the write key, when known
    received_at  timestamptz NOT NULL DEFAULT now(),
    batch_index  integer,
    message_id   text,
    reason_code  text        NOT NULL,
    reason       text        NOT NULL,
    raw          text        NOT NULL      -- text, not jsonb: it may not even be JSON
);
CREATE INDEX quarantine_received ON quarantine (received_at);

-- Write keys, stored only as SHA-256 hashes; the prefix lets people tell keys apart.
CREATE TABLE write_keys (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app         text        NOT NULL,
    key_hash    bytea       NOT NULL UNIQUE,
    key_prefix  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
