-- 002: the nightly job's projection tables. Written only by `onramp report` /
-- `onramp rebuild`; every row can be recomputed from the event log.

-- How far the job has read the log. Not a seq: seq order is not commit order,
-- so a row with a lower seq may become visible after a higher one was read.
-- The job reads by writing-transaction id instead and remembers its snapshot:
-- every transaction below horizon_txid (the snapshot's xmax) had finished,
-- except those in pending_txids (still running then). The next run takes the
-- events of transactions >= horizon_txid or in pending_txids, so nothing that
-- commits late is stepped over, and an unrelated long transaction elsewhere in
-- the cluster does not hold the job back.
CREATE TABLE projection_checkpoint (
    singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    horizon_txid  bigint      NOT NULL DEFAULT 0,
    pending_txids bigint[]    NOT NULL DEFAULT '{}',
    updated_at    timestamptz NOT NULL DEFAULT now()
);
INSERT INTO projection_checkpoint DEFAULT VALUES;

-- anonymous id -> the earliest user id seen with it (docs/funnels.md, "Persons").
CREATE TABLE identity_links (
    app          text        NOT NULL,
    anonymous_id text        NOT NULL,
    user_id      text        NOT NULL,
    first_seen   timestamptz NOT NULL,
    PRIMARY KEY (app, anonymous_id)
);
CREATE INDEX identity_links_user ON identity_links (app, user_id);

-- One row per funnel and person who reached step 1 (the unit of work; a
-- worker can own a hash range of person_id).
CREATE TABLE funnel_persons (
    funnel              text        NOT NULL,
    app                 text        NOT NULL,
    person_id           text        NOT NULL,
    cohort_day          date        NOT NULL,
    level               integer     NOT NULL,   -- required steps reached, in order, within the window
    last_step_index     integer     NOT NULL,   -- 1-based configured index of the highest required step reached
    last_step_name      text        NOT NULL,
    completed           boolean     NOT NULL,
    in_progress         boolean     NOT NULL,   -- not completed, a window still open at the run
    excluded            boolean     NOT NULL,
    start_time          timestamptz NOT NULL,   -- first step-1 event: the cohort
    chain_start_time    timestamptz,
    completion_time     timestamptz,
    seconds_to_complete double precision,
    step_times_us       bigint[]    NOT NULL,   -- per configured step, microseconds since epoch (NULL: not along the chain)
    optional_steps_done integer[]   NOT NULL,   -- 1-based indices of optional steps done in between
    breakdown           jsonb       NOT NULL,   -- dimension -> value at the person's start
    PRIMARY KEY (funnel, person_id)
);
CREATE INDEX funnel_persons_day ON funnel_persons (funnel, cohort_day);
CREATE INDEX funnel_persons_person ON funnel_persons (app, person_id);
CREATE INDEX funnel_persons_open ON funnel_persons (funnel) WHERE in_progress;

-- Per funnel, cohort day and configured step.
CREATE TABLE funnel_daily (
    funnel                       text             NOT NULL,
    app                          text             NOT NULL,
    cohort_day                   date             NOT NULL,
    step_index                   integer          NOT NULL,
    step_name                    text             NOT NULL,
    optional                     boolean          NOT NULL,
    persons                      integer          NOT NULL,
    drop_off                     integer          NOT NULL,
    in_progress                  integer          NOT NULL,
    conversion_from_previous     double precision,
    conversion_from_start        double precision,
    median_seconds_from_previous double precision,
    PRIMARY KEY (funnel, cohort_day, step_index)
);

-- Per funnel and cohort day.
CREATE TABLE funnel_cohorts (
    funnel                     text             NOT NULL,
    app                        text             NOT NULL,
    cohort_day                 date             NOT NULL,
    started                    integer          NOT NULL,
    completed                  integer          NOT NULL,
    in_progress_persons        integer          NOT NULL,
    excluded_persons           integer          NOT NULL,
    completion_rate            double precision,
    completion_ci_low          double precision,
    completion_ci_high         double precision,
    median_seconds_to_complete double precision,
    p90_seconds_to_complete    double precision,
    in_progress                boolean          NOT NULL,  -- some window of the day was still open at the run
    PRIMARY KEY (funnel, cohort_day)
);
