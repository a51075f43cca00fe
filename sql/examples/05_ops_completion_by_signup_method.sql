-- Does the sign-up method (email, Google, Apple) change how many employees
-- finish onboarding? Completion rate per auth_method with its interval.
SELECT breakdown ->> 'properties.auth_method'                    AS auth_method,
       count(*)                                                  AS started,
       count(*) FILTER (WHERE completed)                         AS completed,
       round((count(*) FILTER (WHERE completed))::numeric / count(*), 4) AS completion_rate,
       analytics.wilson_low(count(*) FILTER (WHERE completed), count(*))  AS ci_low,
       analytics.wilson_high(count(*) FILTER (WHERE completed), count(*)) AS ci_high
FROM analytics.funnel_persons
WHERE funnel = 'ops_employee' AND NOT excluded
GROUP BY 1
ORDER BY 1;
