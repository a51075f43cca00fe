-- 027: the persons behind a number of a configured funnel's report
-- (docs/funnels.md, "The persons behind a number"):
--
--   SELECT * FROM analytics.funnel_step_persons('yoked_onboarding', 3, 'dropped');
--
-- Step is the report's row as printed (from 1, optional steps included),
-- outcome one of reached, converted, dropped, in_progress: exactly the
-- persons the report counts in that cell, as of the last nightly run, by
-- the rule the report counts with (Funnels.PersonCell). It runs as the
-- owner so it can leave out, from the moment an erasure commits, the
-- persons it queued for the next run (privacy_pending, which analysts do
-- not read), and keeps to the apps the session's login is granted itself,
-- as the analytics views do: another app's funnel is one that does not exist.

-- Every id merged into a person: each id whose links lead to them (a
-- device's anonymous id, an alias's previous id), as of the last run.
CREATE VIEW analytics_internal.person_ids AS
SELECT l.app, l.person_id, l.anonymous_id AS id, l.first_seen
FROM identity_links l
WHERE l.anonymous_id <> l.person_id;

CREATE VIEW analytics.person_ids WITH (security_barrier) AS
SELECT * FROM analytics_internal.person_ids
WHERE (SELECT public.onramp_reads_every_app()) OR app = ANY ((SELECT public.onramp_granted_apps())::text[]);
GRANT SELECT ON analytics.person_ids TO onramp_analyst, onramp_operator, onramp_reader;

CREATE FUNCTION analytics.funnel_step_persons(
    funnel text, step integer, outcome text,
    breakdown_path text DEFAULT NULL, breakdown_value text DEFAULT NULL, as_of timestamptz DEFAULT now())
RETURNS TABLE (person_id text, group_id text, ids text[], cohort_day date, chain_start timestamptz,
               last_step_index integer, last_step_name text, last_step_time timestamptz,
               seconds_since_last_step double precision, breakdown jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
#variable_conflict use_column
DECLARE
    name text := funnel;
    steps jsonb;
    breakdowns jsonb;
    app_name text;
    -- Persons an erasure queued for the next run: read apart, since on
    -- Citus the queue is a local table the workers cannot join.
    erased text[];
    required integer[];
    reach integer;
BEGIN
    SELECT d.definition -> 'steps', d.definition -> 'breakdowns', d.app INTO steps, breakdowns, app_name
    FROM funnel_definitions d
    WHERE d.funnel = name AND ((SELECT onramp_reads_every_app()) OR d.app = ANY ((SELECT onramp_granted_apps())::text[]));
    IF steps IS NULL THEN
        RAISE EXCEPTION 'funnel_step_persons: funnel: unknown funnel ''%'' (analytics.funnel_definitions lists the funnels the last run built, of the apps this login may read)', name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF outcome IS NULL OR outcome NOT IN ('reached', 'converted', 'dropped', 'in_progress') THEN
        RAISE EXCEPTION 'funnel_step_persons: outcome: unknown outcome ''%'' (expected reached, converted, dropped or in_progress)', outcome
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF step IS NULL OR step < 1 OR step > jsonb_array_length(steps) THEN
        RAISE EXCEPTION 'funnel_step_persons: step: % is out of range (the funnel''s rows are 1 to %)', step, jsonb_array_length(steps)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    required := ARRAY(SELECT s.i::integer FROM jsonb_array_elements(steps) WITH ORDINALITY AS s(v, i)
                      WHERE NOT coalesce((s.v ->> 'optional')::boolean, false) ORDER BY s.i);
    -- The step's place among the required steps: the level that reaches it (NULL: an optional step).
    reach := array_position(required, step);
    IF reach IS NULL AND outcome <> 'reached' THEN
        RAISE EXCEPTION 'funnel_step_persons: outcome: %:%: step % is optional, only reached lists its persons', outcome, step, step
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF outcome = 'converted' AND reach = cardinality(required) THEN
        RAISE EXCEPTION 'funnel_step_persons: outcome: converted:%: step % is the last required step, no one converts from it (reached lists who got there)', step, step
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (breakdown_path IS NULL) <> (breakdown_value IS NULL) THEN
        RAISE EXCEPTION 'funnel_step_persons: breakdown_value: give a breakdown path and a value, or neither'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF breakdown_path IS NOT NULL THEN
        IF NOT breakdowns ? breakdown_path THEN
            RAISE EXCEPTION 'funnel_step_persons: breakdown_path: ''%'' is not a breakdown of the funnel (its breakdowns: %)', breakdown_path,
                (SELECT coalesce(string_agg(b, ', '), 'none') FROM jsonb_array_elements_text(breakdowns) AS b)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM funnel_persons p
                       WHERE p.funnel = name AND coalesce(p.breakdown ->> breakdown_path, '(none)') = breakdown_value) THEN
            RAISE EXCEPTION 'funnel_step_persons: breakdown_value: the funnel has no %=%', breakdown_path, breakdown_value
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    erased := ARRAY(SELECT e.person_id FROM privacy_pending e WHERE e.app = app_name);
    -- The cell's rows first, then the ids merged into them: on Citus the
    -- rows of the distributed table come back before the ids, a reference
    -- table, are joined to them.
    RETURN QUERY
    WITH listed AS MATERIALIZED (
        SELECT p.person_id, p.group_id, p.cohort_day, p.chain_start_time, p.last_step_index, p.last_step_name,
               p.step_times[p.last_step_index] AS at, p.breakdown
        FROM analytics_internal.funnel_persons p
        WHERE p.funnel = name AND NOT p.excluded AND p.level > 0
          AND (p.person_id IS NULL OR p.person_id <> ALL (erased))
          AND (breakdown_path IS NULL OR coalesce(p.breakdown ->> breakdown_path, '(none)') = breakdown_value)
          AND CASE
                WHEN reach IS NULL THEN step = ANY (p.optional_steps_done)
                WHEN outcome = 'reached' THEN p.level >= reach
                WHEN outcome = 'converted' THEN p.level > reach
                WHEN outcome = 'dropped' THEN p.level = reach AND NOT p.completed AND NOT p.in_progress
                ELSE p.level = reach AND NOT p.completed AND p.in_progress
              END
    ), merged AS (
        SELECT m.person_id, array_agg(m.id ORDER BY m.id COLLATE "C") AS ids
        FROM analytics_internal.person_ids m
        WHERE m.app = app_name AND m.person_id IN (SELECT l.person_id FROM listed l WHERE l.person_id IS NOT NULL)
        GROUP BY m.person_id
    )
    SELECT l.person_id, l.group_id,
           CASE WHEN l.group_id IS NOT NULL THEN ARRAY[l.group_id] ELSE l.person_id || coalesce(g.ids, '{}'::text[]) END,
           l.cohort_day, l.chain_start_time, l.last_step_index, l.last_step_name, l.at,
           extract(epoch FROM as_of - l.at)::double precision, l.breakdown
    FROM listed l LEFT JOIN merged g ON g.person_id = l.person_id
    ORDER BY l.at DESC NULLS LAST, coalesce(l.person_id, l.group_id) COLLATE "C";
END $$;

REVOKE EXECUTE ON FUNCTION analytics.funnel_step_persons(text, integer, text, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION analytics.funnel_step_persons(text, integer, text, text, text, timestamptz)
    TO onramp_analyst, onramp_operator, onramp_reader;
