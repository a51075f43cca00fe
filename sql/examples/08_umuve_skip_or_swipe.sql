-- umuve's step 2 is "swiped to page 3" or "tapped Skip": which branch do people
-- take, and do skippers sign in with Apple as often as those who swiped?
WITH starters AS (
    SELECT person_id, completed, level FROM analytics.funnel_persons WHERE funnel = 'umuve_onboarding'
), branch AS (
    SELECT s.person_id, s.level,
           CASE WHEN bool_or(e.event = 'onboarding_skipped') THEN 'skipped' ELSE 'swiped' END AS branch
    FROM starters s
    JOIN analytics.events e ON e.app = 'umuve' AND e.person_id = s.person_id
    WHERE s.level >= 2
    GROUP BY s.person_id, s.level
)
SELECT branch,
       count(*)                               AS persons,
       count(*) FILTER (WHERE level >= 3)     AS signed_in,
       round((count(*) FILTER (WHERE level >= 3))::numeric / count(*), 4) AS sign_in_rate
FROM branch
GROUP BY branch
ORDER BY branch;
