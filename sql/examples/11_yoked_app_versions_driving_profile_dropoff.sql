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
), corrected AS (
    SELECT cells.*, CASE WHEN least(a, b, c, d) = 0 THEN 0.5 ELSE 0 END AS k FROM cells
), ratios AS (
    SELECT app_version, a, b, ln((a + k) * (d + k) / ((b + k) * (c + k))) AS log_ratio,
           1.959963984540054 * sqrt(1 / (a + k) + 1 / (b + k) + 1 / (c + k) + 1 / (d + k)) AS spread
    FROM corrected
)
SELECT app_version,
       a + b                                    AS persons,
       a                                        AS converted,
       b                                        AS dropped,
       round(exp(log_ratio), 4)                 AS odds_ratio,
       round(exp(log_ratio - spread), 4)        AS ci_low,
       round(exp(log_ratio + spread), 4)        AS ci_high
FROM ratios
ORDER BY odds_ratio, app_version;
