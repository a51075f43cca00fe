-- 031: an erasure queues for the next run everyone whose rows counted what
-- went (privacy_pending): the persons erased, and others, such as the user
-- a shared device was linked to. Only the erased leave the audiences at
-- once (no leave recorded or sent, nothing of theirs delivered afterwards):
-- those with no event left under their id. The others stay members until
-- the run recomputes them, which records and delivers what changed, as for
-- anyone; before, they were dropped here and entered again, sent twice.
--
-- It runs as the erasure's own role now, not as the owner: on Citus a
-- transaction may not read the log's shards as another user than the one
-- that just deleted from them. So onramp_privacy deletes from the audience
-- tables itself (and reads them, to find the rows).
GRANT SELECT, DELETE ON audience_members, audience_changes, audience_deliveries, audience_spans TO onramp_privacy;
CREATE OR REPLACE FUNCTION onramp_forget_audience_unit() RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM events e WHERE e.app = NEW.app AND e.user_id = NEW.person_id)
       OR EXISTS (SELECT 1 FROM events e WHERE e.app = NEW.app AND e.anonymous_id = NEW.person_id) THEN
        RETURN NULL;
    END IF;
    DELETE FROM audience_members WHERE app = NEW.app AND person_id = NEW.person_id;
    DELETE FROM audience_changes WHERE app = NEW.app AND person_id = NEW.person_id;
    DELETE FROM audience_deliveries WHERE app = NEW.app AND person_id = NEW.person_id;
    DELETE FROM audience_spans WHERE app = NEW.app AND person_id = NEW.person_id;
    RETURN NULL;
END
$$;
