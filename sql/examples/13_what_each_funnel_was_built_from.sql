-- What each funnel's numbers were computed from, and when: the window, the
-- steps (optional ones marked), the zone its cohort days are cut in, and
-- the fingerprint to compare across databases. A funnel edited in the
-- configuration shows here with a new fingerprint and built_at after the
-- next nightly run, which recomputed it from the whole log.
SELECT funnel,
       app,
       (definition ->> 'window_seconds')::bigint AS window_seconds,
       (SELECT string_agg(CASE WHEN (s ->> 'optional')::boolean THEN '(' || (s ->> 'name') || ')' ELSE s ->> 'name' END,
                          ' → ' ORDER BY n)
        FROM jsonb_array_elements(definition -> 'steps') WITH ORDINALITY AS steps(s, n)) AS steps,
       definition ->> 'time_zone' AS time_zone,
       fingerprint,
       built_at
FROM analytics.funnel_definitions
ORDER BY funnel;
