-- Where do yoked users drop off, per app version?
-- For each app version (at the person's start) and step: how many persons
-- reached the step and how many stopped there (windows closed, not completed).
-- Read: a version whose drop-off jumps at one step shipped a problem there.
-- (The persons are counted by version and level first, then set against the
-- steps, so that it runs on a Citus cluster too.)
WITH persons AS MATERIALIZED (
    SELECT app_version, level, completed, in_progress, count(*) AS persons
    FROM analytics.funnel_persons
    WHERE funnel = 'yoked_onboarding' AND NOT excluded
    GROUP BY app_version, level, completed, in_progress
)
SELECT p.app_version,
       s.step_index,
       s.step_name,
       coalesce(sum(p.persons) FILTER (WHERE p.level >= s.required_position), 0)::bigint AS reached,
       coalesce(sum(p.persons) FILTER (WHERE p.level = s.required_position AND NOT p.completed
                                       AND NOT p.in_progress), 0)::bigint                AS dropped_here
FROM persons p
JOIN (SELECT step_index, step_name,
             row_number() OVER (ORDER BY step_index) AS required_position
      FROM analytics.funnel_steps
      WHERE funnel = 'yoked_onboarding' AND NOT optional) s ON true
GROUP BY p.app_version, s.step_index, s.step_name
ORDER BY p.app_version, s.step_index;
