-- Did the consolidated employee flow (flow_version v3) convert better than the
-- older one (v2)? Completion per version with its 95 % Wilson interval, then
-- the difference v3 − v2 and the two-proportion z-test p-value.
WITH per_version AS (
    SELECT breakdown ->> 'properties.flow_version' AS flow_version,
           count(*)                                AS started,
           count(*) FILTER (WHERE completed)       AS completed
    FROM analytics.funnel_persons
    WHERE funnel = 'ops_employee' AND NOT excluded
    GROUP BY 1
)
SELECT b.flow_version                                                       AS version,
       b.started, b.completed,
       b.completed::float8 / b.started                                      AS completion_rate,
       analytics.wilson_low(b.completed, b.started)                         AS ci_low,
       analytics.wilson_high(b.completed, b.started)                        AS ci_high,
       b.completed::float8 / b.started - a.completed::float8 / a.started    AS difference_vs_v2,
       analytics.two_proportion_p(b.completed, b.started, a.completed, a.started) AS p_value
FROM per_version b
JOIN per_version a ON a.flow_version = 'v2'
WHERE b.flow_version = 'v3';
