-- Does finishing forma's onboarding go with coming back a week later, and
-- does that hold in every app version? Per version at the person's start:
-- of the completers, and of those who started and did not complete, whose
-- day 7 (7 to 8 days after their start) had passed at the last nightly run,
-- how many were active on it; the difference of the two shares and its
-- two-proportion p-value. Only closed windows, not excluded, count.
-- (The persons and their retention are read apart and joined after, and the
-- last run's time is a subquery, so that it runs on a Citus cluster too,
-- which cannot join the two views shard by shard.)
WITH started AS MATERIALIZED (
    SELECT p.app, p.person_id, p.app_version, p.completed
    FROM analytics.funnel_persons p
    WHERE p.funnel = 'forma_onboarding' AND p.level >= 1 AND NOT p.excluded AND NOT p.in_progress
      AND p.start_time + interval '8 days' < (SELECT max(computed_at) FROM analytics.funnel_retention
                                              WHERE funnel = 'forma_onboarding')
), retained AS MATERIALIZED (
    SELECT app, person_id FROM analytics.funnel_person_retention
    WHERE funnel = 'forma_onboarding' AND 7 = ANY (retained_days)
), persons AS (
    SELECT s.app_version, s.completed, r.person_id IS NOT NULL AS retained
    FROM started s LEFT JOIN retained r USING (app, person_id)
), sides AS (
    SELECT app_version,
           count(*) FILTER (WHERE completed)                  AS completers,
           count(*) FILTER (WHERE completed AND retained)     AS completers_retained,
           count(*) FILTER (WHERE NOT completed)              AS non_completers,
           count(*) FILTER (WHERE NOT completed AND retained) AS non_completers_retained
    FROM persons
    GROUP BY app_version
)
SELECT app_version,
       completers, completers_retained,
       round(completers_retained::numeric / NULLIF(completers, 0), 4)             AS completers_d7,
       non_completers, non_completers_retained,
       round(non_completers_retained::numeric / NULLIF(non_completers, 0), 4)     AS non_completers_d7,
       round(completers_retained::numeric / NULLIF(completers, 0)
             - non_completers_retained::numeric / NULLIF(non_completers, 0), 4)   AS difference,
       analytics.two_proportion_p(completers_retained, completers, non_completers_retained, non_completers) AS p_value
FROM sides
ORDER BY app_version DESC;
