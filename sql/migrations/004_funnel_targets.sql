-- 004: the configured targets, written by the nightly job with each run, so
-- dashboards can draw target lines and analysts can compare against them.
CREATE TABLE funnel_targets (
    funnel    text             NOT NULL,
    app       text             NOT NULL,
    name      text             NOT NULL,
    metric    text             NOT NULL,   -- completion_rate, median_seconds_to_complete, p90_seconds_to_complete, conversion
    bound     text             NOT NULL CHECK (bound IN ('at_least', 'at_most')),
    threshold double precision NOT NULL,
    PRIMARY KEY (funnel, name)
);

CREATE VIEW analytics.funnel_targets AS
SELECT funnel, app, name, metric, bound, threshold FROM funnel_targets;

GRANT SELECT ON analytics.funnel_targets TO onramp_analyst, onramp_operator;
