-- 009: what the nightly report's regression check found (docs/funnels.md, "Regressions and alerts"). Each
-- run whose report covers every cohort day in the configured time zone
-- replaces the rows of the funnels it reported: the changes that count
-- (significant after Benjamini–Hochberg, large enough, on enough persons),
-- regressions and improvements, as of `checked_at`. The check itself is
-- statistics over the stored day tallies; it is not recomputed in SQL.
CREATE TABLE funnel_regressions (
    funnel            text             NOT NULL,
    app               text             NOT NULL,
    checked_at        timestamptz      NOT NULL,   -- the run's clock: days closed by then took part
    direction         text             NOT NULL CHECK (direction IN ('regression', 'improvement')),
    kind              text             NOT NULL CHECK (kind IN ('period', 'version')),
    metric            text             NOT NULL,   -- conversion_from_previous, completion_rate, median_seconds_to_complete
    step              text,                        -- conversions: the step converted to
    baseline_label    text             NOT NULL,   -- days `first…last`, or an app version
    baseline_value    double precision,
    baseline_persons  integer          NOT NULL,   -- at the base of the metric
    baseline_ci_low   double precision,            -- rates: 95 % Wilson interval
    baseline_ci_high  double precision,
    recent_label      text             NOT NULL,
    recent_value      double precision,
    recent_persons    integer          NOT NULL,
    recent_ci_low     double precision,
    recent_ci_high    double precision,
    difference        double precision NOT NULL,   -- recent − baseline (rates in proportion, times in seconds)
    p_value           double precision NOT NULL,
    q_value           double precision NOT NULL
);
CREATE INDEX funnel_regressions_funnel ON funnel_regressions (funnel);

CREATE VIEW analytics.funnel_regressions AS
SELECT funnel, app, checked_at, direction, kind, metric, step,
       baseline_label, baseline_value, baseline_persons, baseline_ci_low, baseline_ci_high,
       recent_label, recent_value, recent_persons, recent_ci_low, recent_ci_high,
       difference, p_value, q_value
FROM funnel_regressions;

GRANT SELECT ON analytics.funnel_regressions TO onramp_analyst, onramp_operator;
