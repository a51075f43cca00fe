-- Who entered their phone number in yoked and went no further (dropped off
-- at step 2, phone_entered, their window closed), as of the last nightly
-- run: each person with every id merged into them, the last step's time,
-- how long ago that was and the values they are broken down by. The most
-- recent first: the ones a reminder may still bring back.
SELECT person_id,
       ids,
       cohort_day,
       last_step_time,
       round(seconds_since_last_step / 3600) AS hours_since,
       breakdown ->> 'context.app.version'   AS app_version
FROM analytics.funnel_step_persons('yoked_onboarding', 2, 'dropped')
ORDER BY last_step_time DESC, person_id;
