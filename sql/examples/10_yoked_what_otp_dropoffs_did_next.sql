-- What did yoked users do who entered their phone number but never verified
-- the code (they dropped off at phone_entered, waiting on the OTP)? The first
-- thing they did next within their window, with persons and share of those
-- drop-offs, over every cohort day.
SELECT label                                                          AS did_next,
       sum(persons)                                                   AS persons,
       round(sum(persons)::numeric / sum(sum(persons)) OVER (), 4)    AS share
FROM analytics.funnel_dropoff_next
WHERE funnel = 'yoked_onboarding' AND step_name = 'phone_entered'
GROUP BY label
ORDER BY persons DESC, label;
