-- 005: per funnel and cohort day, the counts and exact durations the printed
-- report adds up (Funnels.FunnelTally, in Projection.TallyEncoding's binary
-- form). A report over all history then reads one row per funnel and day
-- instead of every person's outcome, and a rebuild writes them from memory
-- instead of reading funnel_persons back. Rewritten with funnel_cohorts, for
-- the same days, in the same transaction. Internal: analysts read the
-- cohort tables, which carry the same figures.
CREATE TABLE funnel_tallies (
    funnel     text  NOT NULL,
    cohort_day date  NOT NULL,
    time_zone  text  NOT NULL,   -- the zone the cohort days were cut in
    tally      bytea NOT NULL,
    PRIMARY KEY (funnel, cohort_day)
);
