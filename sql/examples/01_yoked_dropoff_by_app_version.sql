-- Where do yoked users drop off, per app version?
-- For each app version (at the person's start) and step: how many persons
-- reached the step and how many stopped there (windows closed, not completed).
-- Read: a version whose drop-off jumps at one step shipped a problem there.
SELECT p.app_version,
       s.step_index,
       s.step_name,
       count(*) FILTER (WHERE p.level >= s.required_position)                         AS reached,
       count(*) FILTER (WHERE p.level = s.required_position AND NOT p.completed
                        AND NOT p.in_progress)                                         AS dropped_here
FROM analytics.funnel_persons p
JOIN (SELECT step_index, step_name,
             row_number() OVER (ORDER BY step_index) AS required_position
      FROM analytics.funnel_steps
      WHERE funnel = 'yoked_onboarding' AND NOT optional) s ON true
WHERE p.funnel = 'yoked_onboarding' AND NOT p.excluded
GROUP BY p.app_version, s.step_index, s.step_name
ORDER BY p.app_version, s.step_index;
