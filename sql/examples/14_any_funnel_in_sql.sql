-- Any funnel in plain SQL, at query time: how far each yoked person got
-- through the first three onboarding steps within a day (analytics.window_funnel,
-- Onramp's windowFunnel: docs/funnels.md), by platform. Persons are
-- analytics.events.person_id, merged as of the last nightly run; any
-- GROUP BY works (a device: anonymous_id; a day: date_trunc('day', "timestamp")).
SELECT coalesce(os_name, '(none)') AS os_name,
       count(*) FILTER (WHERE level >= 1) AS started,
       count(*) FILTER (WHERE level >= 2) AS phone_entered,
       count(*) FILTER (WHERE level >= 3) AS otp_verified
FROM (
    SELECT person_id,
           min(os_name) AS os_name,
           analytics.window_funnel(interval '1 day', "timestamp",
               event = 'onboarding_started', event = 'phone_entered', event = 'otp_verified') AS level
    FROM analytics.events
    WHERE app = 'yoked' AND type = 'track'
    GROUP BY person_id
) AS persons
WHERE level >= 1
GROUP BY 1
ORDER BY 1;
