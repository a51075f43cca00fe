-- How many events does each platform send per day, per app? (A sudden drop
-- for one platform usually means a broken SDK release, not fewer users.)
SELECT app,
       date_trunc('day', "timestamp")::date AS day,
       COALESCE(os_name, '(unknown)')       AS os_name,
       count(*)                             AS events,
       count(DISTINCT person_id)            AS persons
FROM analytics.events
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3;
