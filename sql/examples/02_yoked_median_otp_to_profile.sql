-- How long does it take yoked users from verifying their phone (otp_verified)
-- to creating a profile (profile_created)? Median and p90 in seconds, over the
-- persons who did both in order within the funnel window, per cohort week.
SELECT date_trunc('week', cohort_day)::date                                   AS cohort_week,
       count(*)                                                                AS persons,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds)                    AS median_seconds,
       percentile_cont(0.9) WITHIN GROUP (ORDER BY seconds)                    AS p90_seconds
FROM (
    SELECT cohort_day,
           extract(epoch FROM step_times[5] - step_times[3]) AS seconds   -- step 3 otp_verified, step 5 profile_created
    FROM analytics.funnel_persons
    WHERE funnel = 'yoked_onboarding' AND step_times[3] IS NOT NULL AND step_times[5] IS NOT NULL
) t
GROUP BY 1
ORDER BY 1;
