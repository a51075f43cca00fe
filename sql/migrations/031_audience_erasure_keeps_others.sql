-- 031: an erasure queues for the next run everyone whose rows counted what
-- went (privacy_pending): the persons erased, and others, such as the user
-- a shared device was linked to. Only the erased leave the audiences at
-- once (no leave recorded or sent, nothing of theirs delivered afterwards):
-- those with no event left under their id. The others stay members until
-- the run recomputes them, which records and delivers what changed, as for
-- anyone; before, they were dropped here and entered again, sent twice.
CREATE OR REPLACE FUNCTION onramp_forget_audience_unit() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
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
