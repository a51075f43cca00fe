-- Completion rate by cohort day for every funnel, with the 95 % interval;
-- days whose windows are still open are marked so nobody reads them as drops.
SELECT funnel,
       cohort_day,
       started,
       completed,
       round(completion_rate::numeric, 4)     AS completion_rate,
       round(completion_ci_low::numeric, 4)   AS ci_low,
       round(completion_ci_high::numeric, 4)  AS ci_high,
       window_open
FROM analytics.funnel_cohorts
ORDER BY funnel, cohort_day;
