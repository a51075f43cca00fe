-- 022: an alias joins identities (docs/funnels.md, "Persons"). Ids are one
-- namespace: a row of identity_links now links any id (a device's
-- anonymous id, or an alias's previousId: an anonymous id or a user id) to
-- the user it was first seen with, and says the person its links lead to.

ALTER TABLE identity_links ADD COLUMN person_id text;
-- Before aliases were followed, a link's user was its person, unless that
-- user id was itself linked (an id sent both ways): then the rebuild below
-- puts it right.
UPDATE identity_links SET person_id = user_id;
ALTER TABLE identity_links ALTER COLUMN person_id SET NOT NULL;
COMMENT ON COLUMN identity_links.anonymous_id IS
    'the id linked: a device''s anonymous id, or an alias''s previousId (an anonymous id or another user id)';
COMMENT ON COLUMN identity_links.person_id IS 'the person the id''s events belong to: where its links lead';
-- A person's ids, for the persons an incremental run recomputes.
CREATE INDEX identity_links_person ON identity_links (app, person_id);

-- The persons already stored were found without following aliases, nor
-- links of ids sent both ways: the funnels of an app whose log holds an
-- alias, a link to a linked user, or a linked id sent as a userId are
-- computed again from its whole log by the next run, as for a changed
-- definition.
DELETE FROM funnel_definitions d
WHERE EXISTS (SELECT 1 FROM events e WHERE e.app = d.app AND e.previous_id IS NOT NULL)
   OR EXISTS (SELECT 1 FROM identity_links a JOIN identity_links b ON b.app = a.app AND b.anonymous_id = a.user_id
              WHERE a.app = d.app AND b.anonymous_id <> a.anonymous_id)
   OR EXISTS (SELECT 1 FROM identity_links a
              WHERE a.app = d.app AND a.user_id <> a.anonymous_id
                AND EXISTS (SELECT 1 FROM events e WHERE e.app = a.app AND e.user_id = a.anonymous_id));

-- A message's person: its id (userId, else anonymousId) followed through
-- its link, if it has one.
CREATE OR REPLACE VIEW analytics.events AS
SELECT e.seq,
       e.app,
       e.type,
       e.message_id,
       e.event,
       COALESCE(l.person_id, e.user_id, e.anonymous_id) AS person_id,
       e.anonymous_id,
       e.user_id,
       e."timestamp",
       e.original_timestamp,
       e.sent_at,
       e.received_at,
       e.context #>> '{os,name}'     AS os_name,
       e.context #>> '{os,version}'  AS os_version,
       e.context #>> '{app,version}' AS app_version,
       e.context #>> '{device,type}' AS device_type,
       e.context ->> 'locale'        AS locale,
       e.properties,
       e.context,
       e.traits,
       e.previous_id,
       e.group_id
FROM events e
LEFT JOIN identity_links l ON l.app = e.app AND l.anonymous_id = COALESCE(e.user_id, e.anonymous_id);

CREATE OR REPLACE VIEW analytics.groups AS
SELECT g.app, g.group_id, coalesce(t.traits, '{}'::jsonb) AS traits, g.first_seen, g.last_seen, g.members, g.calls
FROM (
    SELECT e.app, e.group_id, min(e."timestamp") AS first_seen, max(e."timestamp") AS last_seen,
           count(DISTINCT COALESCE(l.person_id, e.user_id, e.anonymous_id)) AS members, count(*) AS calls
    FROM events e
    LEFT JOIN identity_links l ON l.app = e.app AND l.anonymous_id = COALESCE(e.user_id, e.anonymous_id)
    WHERE e.group_id IS NOT NULL AND e.type = 'group'
    GROUP BY e.app, e.group_id
) g
LEFT JOIN LATERAL (
    SELECT jsonb_object_agg(latest.key, latest.value) AS traits
    FROM (
        SELECT DISTINCT ON (kv.key) kv.key, kv.value
        FROM events x CROSS JOIN LATERAL jsonb_each(x.traits) AS kv(key, value)
        WHERE x.app = g.app AND x.group_id = g.group_id AND x.type = 'group' AND jsonb_typeof(x.traits) = 'object'
        ORDER BY kv.key, x."timestamp" DESC, x.seq DESC
    ) latest
) t ON true;

CREATE OR REPLACE VIEW analytics.group_members AS
SELECT e.app, e.group_id, COALESCE(l.person_id, e.user_id, e.anonymous_id) AS person_id,
       min(e."timestamp") AS first_seen, max(e."timestamp") AS last_seen
FROM events e
LEFT JOIN identity_links l ON l.app = e.app AND l.anonymous_id = COALESCE(e.user_id, e.anonymous_id)
WHERE e.group_id IS NOT NULL AND e.type = 'group'
GROUP BY e.app, e.group_id, COALESCE(l.person_id, e.user_id, e.anonymous_id);

-- An erasure follows aliases: a person's ids are every id an alias joined
-- to theirs, and the links it fixes name their person (docs/privacy.md).
-- Replaced by its owner, as 020 made it: the migrating role is a member of
-- the privacy role only meanwhile.
-- It points the links that led through an erased person on: their person only.
GRANT UPDATE (person_id) ON identity_links TO onramp_privacy;

-- The user each of `ids` of an app was first seen with (on a message with
-- both ids, or as an alias's previousId) and when: the identity rule of
-- docs/funnels.md, read from the events themselves, as the erasure reads it.
CREATE FUNCTION onramp_first_users(app text, ids text[], OUT id text, OUT user_id text, OUT first_seen timestamptz)
RETURNS SETOF record LANGUAGE sql STABLE AS $$
    SELECT DISTINCT ON (s.id) s.id, s.user_id, s.seen FROM (
        SELECT e.anonymous_id AS id, e.user_id, e."timestamp" AS seen FROM events e
        WHERE e.app = $1 AND e.anonymous_id = ANY($2) AND e.user_id IS NOT NULL
        UNION ALL
        SELECT e.previous_id, e.user_id, e."timestamp" FROM events e
        WHERE e.app = $1 AND e.previous_id = ANY($2) AND e.user_id IS NOT NULL) s
    ORDER BY s.id, s.seen, s.user_id COLLATE "C"
$$;
REVOKE ALL ON FUNCTION onramp_first_users(text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION onramp_first_users(text, text[]) TO onramp_privacy;
GRANT onramp_privacy TO CURRENT_USER;
GRANT CREATE ON SCHEMA public TO onramp_privacy;
SET LOCAL ROLE onramp_privacy;
CREATE OR REPLACE FUNCTION onramp_privacy_erase(
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
    joined text[];
    aliased_devices text[];
    repointed text[] := '{}';
    both_ways text[] := '{}';
    linked_after text[] := '{}';
    stepped_ids text[];
    stepped_persons text[];
BEGIN
    PERFORM set_config('lock_timeout', '10s', true);
    LOCK TABLE quarantine, event_ids IN SHARE ROW EXCLUSIVE MODE;
    INSERT INTO privacy_requests (kind, app, requested_by, id_hashes, suppressed)
    SELECT 'erase', erase_app, requested_by,
           array(SELECT onramp_keyed_hash(erase_app, 'user', g.id) FROM unnest(user_ids) AS g(id)
                 UNION ALL SELECT onramp_keyed_hash(erase_app, 'anonymous', g.id) FROM unnest(anonymous_ids) AS g(id)),
           suppress
    RETURNING id INTO request_id;

    -- Each anonymous id given: the user it was first seen with (on a
    -- message with both, or as an alias's previousId), or a person of its own.
    users := array(
        SELECT DISTINCT g.id FROM (
            SELECT given.id FROM unnest(user_ids) AS given(id)
            UNION ALL
            SELECT first.user_id FROM onramp_first_users(erase_app, anonymous_ids) first) AS g(id)
        WHERE g.id IS NOT NULL);
    -- Until nothing is added: every id an alias joined to theirs, their
    -- devices, and a device of theirs also sent as a userId (an id sent
    -- both ways), whose events as a user are theirs too, as are its devices.
    LOOP
        -- Every id an alias joined to theirs, either way: an alias says the
        -- ids are one person, and an erasure errs on the side of erasing.
        LOOP
            joined := array(
                SELECT DISTINCT a.id FROM (
                    SELECT e.previous_id FROM events e WHERE e.app = erase_app AND e.user_id = ANY(users) AND e.previous_id IS NOT NULL
                    UNION
                    SELECT e.user_id FROM events e WHERE e.app = erase_app AND e.previous_id = ANY(users) AND e.user_id IS NOT NULL) AS a(id)
                WHERE NOT (a.id = ANY(users)));
            EXIT WHEN cardinality(joined) = 0;
            users := users || joined;
        END LOOP;
        -- An id an alias named that no message sent as its userId is a device,
        -- theirs if they are the user it was first seen with (below).
        aliased_devices := array(
            SELECT a.id FROM unnest(users) AS a(id)
            WHERE NOT (a.id = ANY(user_ids))
              AND NOT EXISTS (SELECT 1 FROM events e WHERE e.app = erase_app AND e.user_id = a.id));
        users := array(SELECT a.id FROM unnest(users) AS a(id) WHERE NOT (a.id = ANY(aliased_devices)));
        -- Every id seen with those users; it is theirs when one of them is the
        -- user it was first seen with.
        candidates := array(
            SELECT e.anonymous_id FROM events e
            WHERE e.app = erase_app AND e.user_id = ANY(users) AND e.anonymous_id IS NOT NULL
            UNION
            SELECT e.previous_id FROM events e
            WHERE e.app = erase_app AND e.user_id = ANY(users) AND e.previous_id IS NOT NULL);
        devices := array(
            SELECT first.id FROM onramp_first_users(erase_app, candidates) first
            WHERE first.user_id = ANY(users) AND (NOT (first.id = ANY(users)) OR first.id = ANY(both_ways))
            UNION
            SELECT given.id FROM unnest(anonymous_ids) AS given(id)
            WHERE NOT EXISTS (SELECT 1 FROM onramp_first_users(erase_app, ARRAY[given.id])));
        joined := array(
            SELECT d.id FROM unnest(devices) AS d(id)
            WHERE NOT (d.id = ANY(users)) AND EXISTS (SELECT 1 FROM events e WHERE e.app = erase_app AND e.user_id = d.id));
        EXIT WHEN cardinality(joined) = 0;
        both_ways := both_ways || joined;
        users := users || joined;
    END LOOP;
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

    -- Each id's link goes with its user; a device another user still
    -- shows up on (a shared one, or an alias's) links to the earliest user it
    -- is still seen with, and to that user's person, as a rebuild would find.
    WITH gone AS (
        DELETE FROM identity_links l
        WHERE l.app = erase_app
          AND (l.anonymous_id = ANY(devices || relinked || users) OR l.user_id = ANY(users))
        RETURNING l.user_id, l.person_id)
    SELECT count(*), array_agg(gone.user_id) || array_agg(gone.person_id) INTO link_count, linked_before FROM gone;
    INSERT INTO identity_links (app, anonymous_id, user_id, first_seen, person_id)
    SELECT erase_app, first.id, first.user_id, first.first_seen, first.user_id
    FROM onramp_first_users(erase_app, relinked) first;
    -- Every link that named one of them as its person, and every link just
    -- made, leads on through its user's link, one step a round, until
    -- none changes (links in a loop stop at the round limit).
    FOR step IN 1..32 LOOP
        WITH stepped AS (
            UPDATE identity_links l SET person_id = n.person
            FROM (
                SELECT c.anonymous_id, COALESCE(u.person_id, c.user_id) AS person
                FROM identity_links c
                LEFT JOIN identity_links u ON u.app = c.app AND u.anonymous_id = c.user_id AND u.anonymous_id <> c.anonymous_id
                WHERE c.app = erase_app
                  AND (c.person_id = ANY(users || devices) OR c.anonymous_id = ANY(relinked || repointed))) n
            WHERE l.app = erase_app AND l.anonymous_id = n.anonymous_id AND l.person_id IS DISTINCT FROM n.person
            RETURNING l.anonymous_id, l.person_id)
        SELECT array_agg(stepped.anonymous_id), array_agg(stepped.person_id) INTO stepped_ids, stepped_persons FROM stepped;
        EXIT WHEN stepped_ids IS NULL;
        repointed := repointed || stepped_ids;
        linked_after := linked_after || stepped_persons;
    END LOOP;
    -- Whose stored rows counted what went: them, whoever a device of theirs
    -- or an erased alias's was linked to, before and after, and the alias's sender.
    INSERT INTO privacy_pending (app, person_id, request_id)
    SELECT DISTINCT erase_app, p.id, onramp_privacy_erase.request_id FROM (
        SELECT unnest(users || devices || relinked || coalesce(other_users, '{}') || coalesce(linked_before, '{}')
                      || repointed || linked_after) AS id) p
    WHERE p.id IS NOT NULL
    ON CONFLICT DO NOTHING;

    removed := jsonb_build_object(
        'events', event_count, 'event_ids', ledger_count, 'quarantine', quarantine_count, 'identity_links', link_count);
    UPDATE privacy_requests p SET removed = onramp_privacy_erase.removed WHERE p.id = onramp_privacy_erase.request_id;
END $$;
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM onramp_privacy;
REVOKE onramp_privacy FROM CURRENT_USER;

-- The log as query-time tools read it, with an alias's previousId and a
-- group call's groupId: they follow aliases as the nightly job does, and
-- count groups (docs/explore.md).
CREATE OR REPLACE VIEW analytics.event_log AS
SELECT e.app, e.type, e.message_id, e.event, e.anonymous_id, e.user_id, e."timestamp",
       e.properties, e.context, e.traits, e.received_at, e.txid, e.previous_id, e.group_id
FROM events e;
