-- 023: funnels that count groups in the nightly job (docs/funnels.md,
-- "Counting groups"). A group's rows in the per-person tables are keyed by
-- its id behind a unit separator (chr(31)), which no person's id can start
-- with: the views show it as group_id, person_id left empty.

-- A person's group calls, found by any of their ids: an incremental run
-- recomputes the groups of everyone with a new event.
CREATE INDEX events_group_sender ON events (app, (COALESCE(user_id, anonymous_id))) WHERE group_id IS NOT NULL;

-- Persons' rows and groups' rows as two branches, so a condition on
-- person_id still reaches the table's key (an expression over the column
-- would hide it from the planner).
CREATE OR REPLACE VIEW analytics.funnel_persons AS
SELECT p.funnel,
       p.app,
       p.person AS person_id,
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
       p.group_id
FROM (
    SELECT f.*, f.person_id AS person, NULL::text AS group_id FROM funnel_persons f WHERE NOT starts_with(f.person_id, chr(31))
    UNION ALL
    SELECT f.*, NULL, substr(f.person_id, 2) FROM funnel_persons f WHERE starts_with(f.person_id, chr(31))
) p;

CREATE OR REPLACE VIEW analytics.funnel_person_retention AS
SELECT r.app, r.person_id, r.funnel, r.cohort_day, r.retained_days, NULL::text AS group_id
FROM funnel_person_retention r WHERE NOT starts_with(r.person_id, chr(31))
UNION ALL
SELECT r.app, NULL, r.funnel, r.cohort_day, r.retained_days, substr(r.person_id, 2)
FROM funnel_person_retention r WHERE starts_with(r.person_id, chr(31));
