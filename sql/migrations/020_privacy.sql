-- 020: a person erased on request, and kept out afterwards (docs/privacy.md).
--
-- The log stays append-only for everyone but one role, onramp_privacy, which
-- nobody logs in as: its one way in is onramp_privacy_erase(), a SECURITY
-- DEFINER function it owns, which the append-only trigger recognises by the
-- role it runs as. The function records every call in privacy_requests.
-- The server writes as onramp_writer: it can append and look up keys, and
-- can neither erase, nor read the events' contents back, nor the key.
--
-- What must be kept about an erased person (the message ids a re-sending
-- SDK would store again, the ids to keep out) is kept as HMAC-SHA256 keyed
-- with privacy_key, a random key made here, which only the owner can read.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'onramp_writer') THEN
        CREATE ROLE onramp_writer LOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'onramp_privacy') THEN
        CREATE ROLE onramp_privacy NOLOGIN;
    END IF;
END $$;

-- HMAC's two padded keys, stored ready: the key XOR the inner and the outer pad.
CREATE TABLE privacy_key (
    one   boolean PRIMARY KEY DEFAULT true CHECK (one),
    inner_pad bytea NOT NULL,
    outer_pad bytea NOT NULL
);
REVOKE ALL ON privacy_key FROM PUBLIC;

DO $$
DECLARE
    -- 32 bytes from two random UUIDs (pg_strong_random; 244 random bits).
    key bytea := decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex');
    block bytea := key || decode(repeat('00', 64 - length(key)), 'hex');
    inner_pad bytea := block;
    outer_pad bytea := block;
BEGIN
    FOR i IN 0 .. 63 LOOP
        inner_pad := set_byte(inner_pad, i, get_byte(block, i) # 54);   -- 0x36
        outer_pad := set_byte(outer_pad, i, get_byte(block, i) # 92);   -- 0x5c
    END LOOP;
    INSERT INTO privacy_key (inner_pad, outer_pad) VALUES (inner_pad, outer_pad);
END $$;

-- HMAC-SHA256 of "app NUL kind NUL id" (kind: user, anonymous or message)
-- under the pads; NULL for a NULL id. Plain expressions (STABLE, as
-- convert_to is), so the append statement, which reads the pads once, has
-- them inlined for every row.
CREATE FUNCTION onramp_hmac(inner_pad bytea, outer_pad bytea, app text, kind text, id text) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT sha256(outer_pad || sha256(inner_pad || convert_to(app, 'UTF8') || '\x00'::bytea
                                      || convert_to(kind, 'UTF8') || '\x00'::bytea || convert_to(id, 'UTF8')))
$$;

-- The same under the stored key, for the owner's commands and the erasure.
CREATE FUNCTION onramp_keyed_hash(app text, kind text, id text) RETURNS bytea
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT onramp_hmac(k.inner_pad, k.outer_pad, app, kind, id) FROM privacy_key k
$$;
REVOKE ALL ON FUNCTION onramp_keyed_hash(text, text, text) FROM PUBLIC;

-- Every erasure and unsuppression: who asked, the ids as keyed hashes, what went.
CREATE TABLE privacy_requests (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind         text        NOT NULL CHECK (kind IN ('erase', 'unsuppress')),
    app          text        NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT now(),
    requested_by text        NOT NULL,
    id_hashes    bytea[]     NOT NULL,
    suppressed   boolean     NOT NULL DEFAULT false,
    -- table -> rows removed
    removed      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    completed_at timestamptz
);

-- Ids whose later messages are answered but not stored.
CREATE TABLE suppressed_ids (
    app        text   NOT NULL,
    id_hash    bytea  NOT NULL,
    request_id bigint NOT NULL REFERENCES privacy_requests,
    PRIMARY KEY (app, id_hash)
);

-- The message ids of erased events: the ledger's memory of them, hashed.
CREATE TABLE erased_messages (
    app          text   NOT NULL,
    message_hash bytea  NOT NULL,
    request_id   bigint NOT NULL REFERENCES privacy_requests,
    PRIMARY KEY (app, message_hash)
);

-- Per app, the latest client timestamp (`original_timestamp`) among its
-- erased messages: a message sent with a later one is not a re-sent erased
-- message, and is not looked up among them.
CREATE TABLE erased_horizon (
    app            text PRIMARY KEY,
    original_until timestamptz
);

-- Persons erased from the log whose projected rows the next run removes
-- (the erase runs it at once; a crash in between leaves them here).
CREATE TABLE privacy_pending (
    app        text   NOT NULL,
    person_id  text   NOT NULL,
    request_id bigint NOT NULL REFERENCES privacy_requests,
    PRIMARY KEY (app, person_id)
);

-- An alias naming a person's id as its previousId is theirs: found by index,
-- as their other events are (aliases are few).
CREATE INDEX events_previous ON events (app, previous_id) WHERE previous_id IS NOT NULL;

-- Deletes from the log are the privacy role's alone.
CREATE OR REPLACE FUNCTION onramp_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_user = 'onramp_privacy' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'the event log is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'detach a whole month partition to archive old events; erase a person with onramp privacy erase';
END $$;

-- Erases a person of `app` from the log: the user ids given, the persons the
-- anonymous ids given belong to (their earliest user, else themselves), and
-- every anonymous id whose earliest user is one of those users (the
-- identity rules of docs/funnels.md, read from the events themselves).
-- Deletes their events (an event of a device shared with another user
-- stays with that user; an alias naming one of their ids goes), their
-- ledger rows (their message ids kept hashed in erased_messages) and their
-- quarantined messages; with `suppress`, keeps their ids out from now on (a
-- device shared with another user is not suppressed). Fixes the identity
-- links they leave and queues for the projection (privacy_pending) every
-- person whose rows counted what went. Appends and quarantines wait while
-- it runs (locked in the order an append takes them): one that began before
-- it has committed, one after it sees the suppression.
CREATE FUNCTION onramp_privacy_erase(
    erase_app text, user_ids text[], anonymous_ids text[], requested_by text, suppress boolean,
    OUT request_id bigint, OUT users text[], OUT devices text[], OUT shared_devices text[], OUT removed jsonb)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    candidates text[];
    owned text[];
    message_ids text[];
    event_count bigint;
    ledger_count bigint;
    quarantine_count bigint;
    link_count bigint;
    latest timestamptz;
    other_users text[];
    other_devices text[];
    relinked text[];
    linked_before text[];
BEGIN
    PERFORM set_config('lock_timeout', '10s', true);
    LOCK TABLE quarantine, event_ids IN SHARE ROW EXCLUSIVE MODE;
    INSERT INTO privacy_requests (kind, app, requested_by, id_hashes, suppressed)
    SELECT 'erase', erase_app, requested_by,
           array(SELECT onramp_keyed_hash(erase_app, 'user', g.id) FROM unnest(user_ids) AS g(id)
                 UNION ALL SELECT onramp_keyed_hash(erase_app, 'anonymous', g.id) FROM unnest(anonymous_ids) AS g(id)),
           suppress
    RETURNING id INTO request_id;

    -- Each anonymous id given: its earliest user, or a person of its own.
    users := array(
        SELECT DISTINCT g.id FROM (
            SELECT given.id FROM unnest(user_ids) AS given(id)
            UNION ALL
            SELECT first.user_id FROM (
                SELECT DISTINCT ON (e.anonymous_id) e.anonymous_id, e.user_id FROM events e
                WHERE e.app = erase_app AND e.anonymous_id = ANY(anonymous_ids) AND e.user_id IS NOT NULL
                ORDER BY e.anonymous_id, e."timestamp", e.user_id COLLATE "C") first) AS g(id)
        WHERE g.id IS NOT NULL);
    -- Every device seen with those users; it is theirs when one of them is its earliest user.
    candidates := array(
        SELECT DISTINCT e.anonymous_id FROM events e
        WHERE e.app = erase_app AND e.user_id = ANY(users) AND e.anonymous_id IS NOT NULL);
    devices := array(
        SELECT first.anonymous_id FROM (
            SELECT DISTINCT ON (e.anonymous_id) e.anonymous_id, e.user_id FROM events e
            WHERE e.app = erase_app AND e.anonymous_id = ANY(candidates) AND e.user_id IS NOT NULL
            ORDER BY e.anonymous_id, e."timestamp", e.user_id COLLATE "C") first
        WHERE first.user_id = ANY(users)
        UNION
        SELECT given.id FROM unnest(anonymous_ids) AS given(id)
        WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.app = erase_app AND e.anonymous_id = given.id AND e.user_id IS NOT NULL));
    shared_devices := array(
        SELECT DISTINCT e.anonymous_id FROM events e
        WHERE e.app = erase_app AND e.anonymous_id = ANY(devices) AND e.user_id IS NOT NULL AND NOT (e.user_id = ANY(users)));
    -- Their ids alone: a shared device is the other user's too.
    owned := users || array(SELECT d FROM unnest(devices) d WHERE NOT (d = ANY(shared_devices)));

    IF suppress THEN
        INSERT INTO suppressed_ids (app, id_hash, request_id)
        SELECT erase_app, onramp_keyed_hash(erase_app, 'user', g.id), onramp_privacy_erase.request_id FROM unnest(users) AS g(id)
        UNION
        SELECT erase_app, onramp_keyed_hash(erase_app, 'anonymous', g.id), onramp_privacy_erase.request_id FROM unnest(devices) AS g(id)
        WHERE NOT (g.id = ANY(shared_devices))
        ON CONFLICT DO NOTHING;
    END IF;

    WITH gone AS (
        DELETE FROM events e
        WHERE e.app = erase_app
          AND (e.user_id = ANY(users) OR (e.user_id IS NULL AND e.anonymous_id = ANY(devices)) OR e.previous_id = ANY(owned))
        RETURNING e.message_id, e.original_timestamp, e.user_id, e.anonymous_id)
    SELECT array_agg(gone.message_id), count(*), max(gone.original_timestamp),
           -- An alias renaming one of their ids was sent as another user, maybe from another device.
           array_agg(DISTINCT gone.user_id) FILTER (WHERE NOT (gone.user_id = ANY(users))),
           array_agg(DISTINCT gone.anonymous_id) FILTER (WHERE NOT (gone.anonymous_id = ANY(devices)))
    INTO message_ids, event_count, latest, other_users, other_devices FROM gone;
    relinked := shared_devices || coalesce(other_devices, '{}');
    INSERT INTO erased_horizon AS h (app, original_until) VALUES (erase_app, latest)
    ON CONFLICT (app) DO UPDATE SET original_until = greatest(h.original_until, excluded.original_until);

    WITH gone AS (
        DELETE FROM event_ids l WHERE l.app = erase_app AND l.message_id = ANY(message_ids) RETURNING 1)
    SELECT count(*) INTO ledger_count FROM gone;
    INSERT INTO erased_messages (app, message_hash, request_id)
    SELECT erase_app, onramp_keyed_hash(erase_app, 'message', g.id), onramp_privacy_erase.request_id FROM unnest(message_ids) AS g(id)
    ON CONFLICT DO NOTHING;

    -- A quarantined message is kept as compact JSON text with sorted keys
    -- (maybe not valid JSON): theirs when it names one of their ids.
    WITH gone AS (
        DELETE FROM quarantine q
        WHERE q.app = erase_app
          AND EXISTS (
              SELECT 1 FROM unnest(owned) AS i(id), unnest(ARRAY['"userId":', '"anonymousId":', '"previousId":']) AS f(field)
              WHERE strpos(q.raw, f.field || to_json(i.id)::text) > 0
                 -- an id sent as a number
                 OR (i.id ~ '^-?[0-9]+$' AND (strpos(q.raw, f.field || i.id || ',') > 0 OR strpos(q.raw, f.field || i.id || '}') > 0)))
        RETURNING 1)
    SELECT count(*) INTO quarantine_count FROM gone;

    -- Each device's link goes with its user; a device another user still
    -- shows up on (a shared one, or an alias's) links to the earliest user it
    -- is still seen with, as a rebuild would find.
    WITH gone AS (
        DELETE FROM identity_links l
        WHERE l.app = erase_app AND (l.anonymous_id = ANY(devices || relinked) OR l.user_id = ANY(users))
        RETURNING l.user_id)
    SELECT count(*), array_agg(gone.user_id) INTO link_count, linked_before FROM gone;
    WITH linked AS (
        INSERT INTO identity_links (app, anonymous_id, user_id, first_seen)
        SELECT DISTINCT ON (e.anonymous_id) e.app, e.anonymous_id, e.user_id, min(e."timestamp")
        FROM events e WHERE e.app = erase_app AND e.anonymous_id = ANY(relinked) AND e.user_id IS NOT NULL
        GROUP BY e.app, e.anonymous_id, e.user_id
        ORDER BY e.anonymous_id, min(e."timestamp"), e.user_id COLLATE "C"
        RETURNING user_id)
    -- Whose stored rows counted what went: them, whoever a device of theirs
    -- or an erased alias's was linked to, before and after, and the alias's sender.
    INSERT INTO privacy_pending (app, person_id, request_id)
    SELECT DISTINCT erase_app, p.id, onramp_privacy_erase.request_id FROM (
        SELECT unnest(users || devices || relinked || coalesce(other_users, '{}') || coalesce(linked_before, '{}')) AS id
        UNION ALL
        SELECT linked.user_id FROM linked) p
    WHERE p.id IS NOT NULL
    ON CONFLICT DO NOTHING;

    removed := jsonb_build_object(
        'events', event_count, 'event_ids', ledger_count, 'quarantine', quarantine_count, 'identity_links', link_count);
    UPDATE privacy_requests p SET removed = onramp_privacy_erase.removed WHERE p.id = onramp_privacy_erase.request_id;
END $$;
REVOKE ALL ON FUNCTION onramp_privacy_erase(text, text[], text[], text, boolean) FROM PUBLIC;

-- The privacy role does what the function does, no more.
GRANT SELECT, DELETE ON events, event_ids, quarantine TO onramp_privacy;
GRANT SELECT, INSERT, UPDATE ON privacy_requests TO onramp_privacy;
GRANT SELECT, INSERT ON suppressed_ids, erased_messages TO onramp_privacy;
GRANT SELECT, INSERT, UPDATE ON erased_horizon TO onramp_privacy;
GRANT SELECT, INSERT, DELETE ON identity_links TO onramp_privacy;
GRANT INSERT ON privacy_pending TO onramp_privacy;
GRANT EXECUTE ON FUNCTION onramp_keyed_hash(text, text, text) TO onramp_privacy;

-- The function belongs to the privacy role; the migrating role calls it
-- and is no member of it afterwards, so it deletes only through it. (The
-- owner owns the tables and could drop the trigger: the trigger keeps
-- every session from deleting by mistake, not the owner from meaning to.)
GRANT onramp_privacy TO CURRENT_USER;
GRANT CREATE ON SCHEMA public TO onramp_privacy;
ALTER FUNCTION onramp_privacy_erase(text, text[], text[], text, boolean) OWNER TO onramp_privacy;
GRANT EXECUTE ON FUNCTION onramp_privacy_erase(text, text[], text[], text, boolean) TO CURRENT_USER;
REVOKE CREATE ON SCHEMA public FROM onramp_privacy;
REVOKE onramp_privacy FROM CURRENT_USER;

-- For each message of an append (the arrays in step), whether it carries a
-- suppressed id (as userId, anonymousId or an alias's previousId) and
-- whether its messageId was erased; looked up only for the apps that have
-- any. Each distinct id is hashed once (a batch is mostly one device's);
-- a message is looked up among the erased only when its client timestamp
-- is not after the latest one erased (`erased_horizon`; a re-sent message
-- keeps its timestamp, live traffic is later). The server calls it without
-- reading the key or the hashes: whoever holds the server cannot test
-- guessed ids against them. Refuses, rather than letting everyone through,
-- when the key is gone while there is something to keep out (a dump
-- restored without privacy_key).
CREATE FUNCTION onramp_kept_out(
    apps text[], user_ids text[], anonymous_ids text[], previous_ids text[], message_ids text[], original_timestamps text[])
RETURNS TABLE (ord bigint, suppressed boolean, erased boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
#variable_conflict use_column
DECLARE
    inner_pad bytea;
    outer_pad bytea;
BEGIN
    SELECT k.inner_pad, k.outer_pad INTO inner_pad, outer_pad FROM privacy_key k;
    IF inner_pad IS NULL AND EXISTS (
        SELECT 1 FROM (SELECT DISTINCT a.app FROM unnest(apps) AS a(app)) a
        WHERE EXISTS (SELECT 1 FROM suppressed_ids s WHERE s.app = a.app) OR EXISTS (SELECT 1 FROM erased_messages m WHERE m.app = a.app))
    THEN
        RAISE EXCEPTION 'privacy_key is empty: suppressed ids and erased messages cannot be recognised'
            USING HINT = 'restore privacy_key from the dump it was left out of (docs/privacy.md)';
    END IF;
    RETURN QUERY
    WITH input AS (
        SELECT * FROM unnest(apps, user_ids, anonymous_ids, previous_ids, message_ids, original_timestamps)
            WITH ORDINALITY AS t(app, user_id, anonymous_id, previous_id, message_id, original_timestamp, ord)
    ), kept_out AS MATERIALIZED (
        SELECT a.app,
               EXISTS (SELECT 1 FROM suppressed_ids s WHERE s.app = a.app) AS suppressing,
               EXISTS (SELECT 1 FROM erased_messages m WHERE m.app = a.app) AS erasing,
               (SELECT h.original_until FROM erased_horizon h WHERE h.app = a.app) AS erased_until
        FROM (SELECT DISTINCT input.app FROM input) a
    ), hits AS MATERIALIZED (
        SELECT d.app, d.kind, d.id FROM (
            SELECT DISTINCT i.app, v.kind, v.id
            FROM input i JOIN kept_out k ON k.app = i.app AND k.suppressing
            CROSS JOIN LATERAL (VALUES ('user', NULLIF(i.user_id, '')), ('anonymous', NULLIF(i.anonymous_id, '')),
                                       ('user', NULLIF(i.previous_id, '')), ('anonymous', NULLIF(i.previous_id, ''))) AS v(kind, id)
            WHERE v.id IS NOT NULL) d
        WHERE EXISTS (
            SELECT 1 FROM suppressed_ids s WHERE s.app = d.app AND s.id_hash = onramp_hmac(inner_pad, outer_pad, d.app, d.kind, d.id))
    )
    SELECT i.ord,
           EXISTS (
               SELECT 1 FROM hits h
               WHERE h.app = i.app
                 AND (h.kind = 'user' AND h.id IN (i.user_id, i.previous_id)
                      OR h.kind = 'anonymous' AND h.id IN (i.anonymous_id, i.previous_id))),
           CASE WHEN k.erasing AND (NULLIF(i.original_timestamp, '') IS NULL OR i.original_timestamp::timestamptz <= k.erased_until)
           THEN EXISTS (
               SELECT 1 FROM erased_messages m
               WHERE m.app = i.app AND m.message_hash = onramp_hmac(inner_pad, outer_pad, i.app, 'message', NULLIF(i.message_id, '')))
           ELSE false END
    FROM input i JOIN kept_out k ON k.app = i.app;
END $$;
REVOKE ALL ON FUNCTION onramp_kept_out(text[], text[], text[], text[], text[], text[]) FROM PUBLIC;

-- The coming months' partitions, as the server makes them at start-up and
-- daily: as the owner, and no more than the owner's own default.
CREATE FUNCTION onramp_ensure_coming_partitions() RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT onramp_ensure_event_partitions(1, 3)
$$;
REVOKE ALL ON FUNCTION onramp_ensure_coming_partitions() FROM PUBLIC;

-- Nobody but the owner creates objects in public (the default since
-- PostgreSQL 15; a cluster upgraded from before keeps the old grant): a
-- function planted there could shadow a built-in the functions above call.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;

-- The server: appends and quarantines, reads write keys, asks what to keep
-- out, makes partitions, and checks the migrations for /readyz.
GRANT USAGE ON SCHEMA public TO onramp_writer;
GRANT INSERT ON events, event_ids, quarantine TO onramp_writer;
GRANT SELECT (app, message_id) ON events TO onramp_writer;
GRANT SELECT (app, message_id, seq) ON event_ids TO onramp_writer;
GRANT USAGE ON SEQUENCE event_seq TO onramp_writer;
GRANT SELECT ON write_keys, onramp_schema_migrations TO onramp_writer;
GRANT EXECUTE ON FUNCTION onramp_kept_out(text[], text[], text[], text[], text[], text[]), onramp_ensure_coming_partitions() TO onramp_writer;

-- How many erasures the log has had: a copy of it kept elsewhere (the
-- explorer's columns and answers) starts again when this changes.
CREATE VIEW analytics.log_erasures AS
SELECT count(*) AS erasures FROM privacy_requests WHERE kind = 'erase';
GRANT SELECT ON analytics.log_erasures TO onramp_analyst, onramp_operator;
