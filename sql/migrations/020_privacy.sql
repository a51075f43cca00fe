-- 020: a person erased on request, and kept out afterwards (docs/privacy.md).
--
-- The log stays append-only for everyone but one role, onramp_privacy, which
-- nobody logs in as: its one way in is onramp_privacy_erase(), a SECURITY
-- DEFINER function it owns, which the append-only trigger recognises by the
-- role it runs as. The function records every call in privacy_requests.
-- The server writes as onramp_writer: it can append and look up keys, and
-- can neither erase nor read the events' contents back.
--
-- What must be kept about an erased person (the message ids a re-sending
-- SDK would store again, the ids to keep out) is kept as HMAC-SHA256 keyed
-- with privacy_key, a random key made here, which only the owner and the
-- server (which must hash what it is sent) can read.

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
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
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

-- Persons erased from the log whose projected rows the next run removes
-- (the erase runs it at once; a crash in between leaves them here).
CREATE TABLE privacy_pending (
    app        text   NOT NULL,
    person_id  text   NOT NULL,
    request_id bigint NOT NULL REFERENCES privacy_requests,
    PRIMARY KEY (app, person_id)
);

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
-- stays with that user), their ledger rows (their message ids kept hashed
-- in erased_messages) and the quarantined messages quoting their ids; with
-- `suppress`, keeps their ids out from now on (a device shared with another
-- user is not suppressed). Appends wait while it runs: one that began
-- before it has committed, one after it sees the suppression.
CREATE FUNCTION onramp_privacy_erase(
    erase_app text, user_ids text[], anonymous_ids text[], requested_by text, suppress boolean,
    OUT request_id bigint, OUT users text[], OUT devices text[], OUT shared_devices text[], OUT removed jsonb)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    candidates text[];
    message_ids text[];
    event_count bigint;
    ledger_count bigint;
    quarantine_count bigint;
BEGIN
    LOCK TABLE event_ids IN SHARE MODE;
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
                SELECT DISTINCT ON (anonymous_id) anonymous_id, user_id FROM events
                WHERE app = erase_app AND anonymous_id = ANY(anonymous_ids) AND user_id IS NOT NULL
                ORDER BY anonymous_id, "timestamp", user_id COLLATE "C") first) AS g(id)
        WHERE g.id IS NOT NULL);
    -- Every device seen with those users; it is theirs when one of them is its earliest user.
    candidates := array(
        SELECT DISTINCT anonymous_id FROM events
        WHERE app = erase_app AND user_id = ANY(users) AND anonymous_id IS NOT NULL);
    devices := array(
        SELECT anonymous_id FROM (
            SELECT DISTINCT ON (anonymous_id) anonymous_id, user_id FROM events
            WHERE app = erase_app AND anonymous_id = ANY(candidates) AND user_id IS NOT NULL
            ORDER BY anonymous_id, "timestamp", user_id COLLATE "C") first
        WHERE user_id = ANY(users)
        UNION
        SELECT given.id FROM unnest(anonymous_ids) AS given(id)
        WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.app = erase_app AND e.anonymous_id = given.id AND e.user_id IS NOT NULL));
    shared_devices := array(
        SELECT DISTINCT anonymous_id FROM events
        WHERE app = erase_app AND anonymous_id = ANY(devices) AND user_id IS NOT NULL AND NOT (user_id = ANY(users)));

    IF suppress THEN
        INSERT INTO suppressed_ids (app, id_hash, request_id)
        SELECT erase_app, onramp_keyed_hash(erase_app, 'user', g.id), onramp_privacy_erase.request_id FROM unnest(users) AS g(id)
        UNION
        SELECT erase_app, onramp_keyed_hash(erase_app, 'anonymous', g.id), onramp_privacy_erase.request_id FROM unnest(devices) AS g(id)
        WHERE NOT (g.id = ANY(shared_devices))
        ON CONFLICT DO NOTHING;
    END IF;

    WITH gone AS (
        DELETE FROM events
        WHERE app = erase_app AND (user_id = ANY(users) OR (user_id IS NULL AND anonymous_id = ANY(devices)))
        RETURNING message_id)
    SELECT array_agg(message_id), count(*) INTO message_ids, event_count FROM gone;

    WITH gone AS (
        DELETE FROM event_ids WHERE app = erase_app AND message_id = ANY(message_ids) RETURNING message_id)
    SELECT count(*) INTO ledger_count FROM gone;
    INSERT INTO erased_messages (app, message_hash, request_id)
    SELECT erase_app, onramp_keyed_hash(erase_app, 'message', g.id), onramp_privacy_erase.request_id FROM unnest(message_ids) AS g(id)
    ON CONFLICT DO NOTHING;

    -- A quarantined message is text, maybe not JSON: it is theirs when it quotes one of their ids.
    WITH gone AS (
        DELETE FROM quarantine q
        WHERE (q.app = erase_app OR q.app IS NULL)
          AND EXISTS (SELECT 1 FROM unnest(users || devices) AS i(id) WHERE strpos(q.raw, to_json(i.id)::text) > 0)
        RETURNING 1)
    SELECT count(*) INTO quarantine_count FROM gone;

    removed := jsonb_build_object('events', event_count, 'event_ids', ledger_count, 'quarantine', quarantine_count);
    UPDATE privacy_requests p SET removed = onramp_privacy_erase.removed WHERE p.id = onramp_privacy_erase.request_id;
END $$;
REVOKE ALL ON FUNCTION onramp_privacy_erase(text, text[], text[], text, boolean) FROM PUBLIC;

-- The privacy role does what the function does, no more.
GRANT SELECT, DELETE ON events, event_ids, quarantine TO onramp_privacy;
GRANT SELECT, INSERT, UPDATE ON privacy_requests TO onramp_privacy;
GRANT SELECT, INSERT ON suppressed_ids, erased_messages TO onramp_privacy;
GRANT EXECUTE ON FUNCTION onramp_keyed_hash(text, text, text) TO onramp_privacy;

-- The function belongs to the privacy role; the migrating role calls it
-- and is no member of it afterwards (it cannot become the role and delete).
GRANT onramp_privacy TO CURRENT_USER;
GRANT CREATE ON SCHEMA public TO onramp_privacy;
ALTER FUNCTION onramp_privacy_erase(text, text[], text[], text, boolean) OWNER TO onramp_privacy;
GRANT EXECUTE ON FUNCTION onramp_privacy_erase(text, text[], text[], text, boolean) TO CURRENT_USER;
REVOKE CREATE ON SCHEMA public FROM onramp_privacy;
REVOKE onramp_privacy FROM CURRENT_USER;

-- The server: appends, quarantines, reads keys and what it must keep out.
-- Partitions it makes at start-up through the owner's function.
ALTER FUNCTION onramp_ensure_event_partitions(integer, integer) SECURITY DEFINER SET search_path = public, pg_temp;
GRANT USAGE ON SCHEMA public TO onramp_writer;
GRANT INSERT ON events, event_ids, quarantine TO onramp_writer;
GRANT SELECT (app, message_id) ON events TO onramp_writer;
GRANT SELECT (app, message_id, seq) ON event_ids TO onramp_writer;
GRANT USAGE ON SEQUENCE event_seq TO onramp_writer;
GRANT SELECT ON write_keys, suppressed_ids, erased_messages, privacy_key TO onramp_writer;
GRANT EXECUTE ON FUNCTION onramp_keyed_hash(text, text, text), onramp_ensure_event_partitions(integer, integer) TO onramp_writer;

-- How many erasures the log has had: a copy of it kept elsewhere (the
-- explorer's columns and answers) starts again when this changes.
CREATE VIEW analytics.log_erasures AS
SELECT count(*) AS erasures FROM privacy_requests WHERE kind = 'erase';
GRANT SELECT ON analytics.log_erasures TO onramp_analyst, onramp_operator;
