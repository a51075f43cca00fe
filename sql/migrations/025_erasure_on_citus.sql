-- 025: the erasure in a form Citus can plan over a distributed log
-- (docs/scaling.md). Which ids were sent as a userId, and which ids given
-- no message links to a user, are read once into arrays rather than probed
-- id by id by a subquery correlated with the list of ids; and the first
-- users are found by PL/pgSQL. Citus refuses both forms over distributed
-- tables. The same answers on one PostgreSQL (the privacy tests). On Citus
-- both functions stay on the coordinator, the only place they run.
SET LOCAL citus.enable_ddl_propagation = off;

-- The user each of `ids` of an app was first seen with, as 022 says; in
-- PL/pgSQL, since Citus plans no SQL function over distributed tables that
-- is called with parameters.
CREATE OR REPLACE FUNCTION onramp_first_users(app text, ids text[], OUT id text, OUT user_id text, OUT first_seen timestamptz)
RETURNS SETOF record LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT DISTINCT ON (s.id) s.id, s.user_id, s.seen FROM (
        SELECT e.anonymous_id AS id, e.user_id, e."timestamp" AS seen FROM events e
        WHERE e.app = onramp_first_users.app AND e.anonymous_id = ANY(onramp_first_users.ids) AND e.user_id IS NOT NULL
        UNION ALL
        SELECT e.previous_id, e.user_id, e."timestamp" FROM events e
        WHERE e.app = onramp_first_users.app AND e.previous_id = ANY(onramp_first_users.ids) AND e.user_id IS NOT NULL) s
    ORDER BY s.id, s.seen, s.user_id COLLATE "C";
END
$$;

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
    sent_as_users text[];
    given_seen text[];
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
    -- The ids given that no message links to a user: a device of its own.
    given_seen := array(SELECT first.id FROM onramp_first_users(erase_app, anonymous_ids) first);
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
        sent_as_users := array(SELECT DISTINCT e.user_id FROM events e WHERE e.app = erase_app AND e.user_id = ANY(users));
        aliased_devices := array(
            SELECT a.id FROM unnest(users) AS a(id)
            WHERE NOT (a.id = ANY(user_ids)) AND NOT (a.id = ANY(sent_as_users)));
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
            WHERE NOT (given.id = ANY(given_seen)));
        sent_as_users := array(SELECT DISTINCT e.user_id FROM events e WHERE e.app = erase_app AND e.user_id = ANY(devices));
        joined := array(
            SELECT d.id FROM unnest(devices) AS d(id)
            WHERE NOT (d.id = ANY(users)) AND d.id = ANY(sent_as_users));
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
