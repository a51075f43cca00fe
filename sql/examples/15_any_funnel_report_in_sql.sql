-- Any funnel's per-step report in one call, at query time: the whole yoked
-- onboarding funnel as JSON, in the configuration's own terms (docs/funnels.md),
-- through analytics.funnel_report. Rows: each step's persons, conversion from
-- the previous step and from the start, those who dropped off there and those
-- whose window is still open. Persons are analytics.events.person_id, merged
-- as of the last nightly run; every cohort day counts.
SELECT step_index, step_name, persons,
       round(conversion_from_previous::numeric, 3) AS from_previous,
       round(conversion_from_start::numeric, 3) AS from_start,
       drop_off, in_progress
FROM analytics.funnel_report('{
  "app": "yoked",
  "window": "24h",
  "steps": [
    {"event": "onboarding_started"}, {"event": "phone_entered"}, {"event": "otp_verified"},
    {"event": "age_verified"}, {"event": "profile_created"}, {"event": "location_allowed"},
    {"event": "questionnaire_started"}, {"event": "questionnaire_completed"}, {"event": "profiling_completed"},
    {"event": "verification_consent_given"}, {"event": "verification_completed"}, {"event": "onboarding_completed"}
  ]
}')
ORDER BY step_index;
