-- 023: funnels that count groups in the nightly job (docs/funnels.md,
-- "Counting groups"). A group's rows in the per-person tables are keyed by
-- its id behind a unit separator (chr(31)), which no person's id can start
-- with: the views show it as group_id, person_id left empty.

-- A person's group calls, found by any of their ids: an incremental run
-- recomputes the groups of everyone with a new event.
CREATE INDEX events_group_sender ON events (app, (COALESCE(user_id, anonymous_id))) WHERE group_id IS NOT NULL;

CREATE OR REPLACE VIEW analytics.funnel_persons AS
SELECT p.funnel,
       p.app,
       CASE WHEN starts_with(p.person_id, chr(31)) THEN NULL ELSE p.person_id END AS person_id,
       p.cohort_day,
       p.level,
       p.last_step_index,
       p.last_step_name,
       p.completed,
       p.in_progress,
       p.excluded,
       p.start_time,
       p.chain_start_time,
       p.completion_time,
       p.seconds_to_complete,
       ARRAY(SELECT CASE WHEN t IS NULL THEN NULL ELSE to_timestamp(t / 1000000.0) END
             FROM unnest(p.step_times_us) WITH ORDINALITY AS u(t, n) ORDER BY n) AS step_times,
       p.optional_steps_done,
       p.breakdown,
       p.breakdown ->> 'context.os.name'     AS os_name,
       p.breakdown ->> 'context.app.version' AS app_version,
       CASE WHEN starts_with(p.person_id, chr(31)) THEN substr(p.person_id, 2) END AS group_id
FROM funnel_persons p;

CREATE OR REPLACE VIEW analytics.funnel_person_retention AS
SELECT app,
       CASE WHEN starts_with(person_id, chr(31)) THEN NULL ELSE person_id END AS person_id,
       funnel, cohort_day, retained_days,
       CASE WHEN starts_with(person_id, chr(31)) THEN substr(person_id, 2) END AS group_id
FROM funnel_person_retention;
