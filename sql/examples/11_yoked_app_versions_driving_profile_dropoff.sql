-- Which app versions go with dropping off at yoked's profile step (reached
-- profile_created, never allowed location)? Per version, over every cohort
-- day: persons, converted and dropped, and the odds ratio of converting
-- against everyone else at the step, with its 95 % interval (0.5 added to
-- every cell when one is zero). Below 1, the version goes with dropping off.
WITH cells AS (
    SELECT value AS app_version, sum(with_converted) AS a, sum(with_dropped) AS b,
           sum(without_converted) AS c, sum(without_dropped) AS d
    FROM analytics.funnel_drivers
    WHERE funnel = 'yoked_onboarding' AND from_step = 'profile_created'
      AND kind = 'breakdown' AND dimension = 'context.app.version'
    GROUP BY value
)
SELECT app_version,
       a + b                                                  AS persons,
       a                                                      AS converted,
       b                                                      AS dropped,
       round(analytics.odds_ratio(a, b, c, d)::numeric, 4)      AS odds_ratio,
       round(analytics.odds_ratio_low(a, b, c, d)::numeric, 4)  AS ci_low,
       round(analytics.odds_ratio_high(a, b, c, d)::numeric, 4) AS ci_high
FROM cells
ORDER BY odds_ratio, app_version;
