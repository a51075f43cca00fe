-- Which company creators are stuck at the companyDetails screen for over a day?
-- (Reached it, went no further, and their funnel window has closed.) A list
-- for the support team to reach out to.
SELECT person_id,
       step_times[last_step_index]              AS reached_company_details_at,
       now() - step_times[last_step_index]      AS stuck_for,
       breakdown ->> 'context.os.name'          AS os_name
FROM analytics.funnel_persons
WHERE funnel = 'ops_company_creator'
  AND last_step_name = 'companyDetails'
  AND NOT completed
  AND step_times[last_step_index] < now() - interval '1 day'
ORDER BY reached_company_details_at;
