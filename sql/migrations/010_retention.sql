-- 010: does onboarding matter (docs/funnels.md, "Retention"): day-N retention of those who
-- completed a funnel against those who did not. A person is retained on day
-- N when they were active (any event of the app, or one of the funnel's
-- retention.active_events) in [t1 + N·24 h, t1 + (N+1)·24 h), t1 their
-- start_time; eligible once t1 + (N+1)·24 h is before the run. Only persons
-- with closed windows, not excluded, count. Every row can be recomputed
-- from the event log; a rebuild gives the same rows as the incremental runs.

-- One row per funnel and started, not excluded person active on some
-- configured retention day: the compact record a person's later activity
-- updates without recomputing their funnels.
CREATE TABLE funnel_person_retention (
    app           text      NOT NULL,
    person_id     text      NOT NULL,
    funnel        text      NOT NULL,
    cohort_day    date      NOT NULL,
    retained_days integer[] NOT NULL,   -- the configured days N they were active on, ascending
    PRIMARY KEY (app, person_id, funnel)
);

-- Per funnel, cohort day and outcome: the start times (microseconds) of the
-- persons counted (day_n -1) and of those retained on day N (day_n N), from
-- which funnel_retention is counted at any run's time.
CREATE TABLE funnel_retention_starts (
    funnel     text     NOT NULL,
    app        text     NOT NULL,
    cohort_day date     NOT NULL,
    completed  boolean  NOT NULL,
    day_n      integer  NOT NULL CHECK (day_n >= -1),
    start_us   bigint[] NOT NULL,
    PRIMARY KEY (funnel, cohort_day, completed, day_n)
);

-- Per funnel, cohort day, retention day and outcome, as of computed_at.
CREATE TABLE funnel_retention (
    funnel              text        NOT NULL,
    app                 text        NOT NULL,
    cohort_day          date        NOT NULL,
    day_n               integer     NOT NULL,
    completed           boolean     NOT NULL,
    eligible            integer     NOT NULL,   -- persons whose day N had passed at computed_at
    retained            integer     NOT NULL,   -- of those, active on day N
    pending             integer     NOT NULL,   -- persons whose day N had not passed yet
    computed_at         timestamptz NOT NULL,   -- the run's clock
    next_eligible_after timestamptz,            -- a run after this counts one more eligible (NULL: none pending)
    PRIMARY KEY (funnel, cohort_day, day_n, completed)
);
CREATE INDEX funnel_retention_due ON funnel_retention (funnel, next_eligible_after) WHERE next_eligible_after IS NOT NULL;

-- Per funnel, cohort day, retention day and outcome: eligible, retained,
-- pending and the rate with its 95 % Wilson interval. Sum eligible and
-- retained over days for a range (analytics.wilson_low/high for its interval).
CREATE VIEW analytics.funnel_retention AS
SELECT funnel, app, cohort_day, day_n AS day,
       CASE WHEN completed THEN 'completers' ELSE 'non_completers' END AS outcome,
       eligible, retained, pending,
       retained::float8 / NULLIF(eligible, 0) AS rate,
       analytics.wilson_low(retained, eligible) AS ci_low,
       analytics.wilson_high(retained, eligible) AS ci_high,
       computed_at
FROM funnel_retention;

-- Per funnel and person: the retention days they were active on (persons
-- active on none have no row). Join analytics.funnel_persons for outcome,
-- start and breakdowns.
CREATE VIEW analytics.funnel_person_retention AS
SELECT app, person_id, funnel, cohort_day, retained_days
FROM funnel_person_retention;

GRANT SELECT ON analytics.funnel_retention, analytics.funnel_person_retention TO onramp_analyst, onramp_operator;
