-- 008: why persons drop off (docs/funnels.md, "Why they drop off"). The nightly job stores per person
-- what their events say (funnel_person_diagnostics), then per funnel and
-- cohort day what reports add up over any range: the lingering times of
-- those who dropped at each step, the first thing they did instead, and the
-- 2×2 counts of every drivers candidate. Every row can be recomputed from
-- the event log; a rebuild gives the same rows as the incremental runs.

-- One row per funnel and person at step 1, not excluded, who did not
-- complete or did something between steps. Whether the window has closed is
-- funnel_persons.in_progress: these facts look only at events up to the
-- window's end.
CREATE TABLE funnel_person_diagnostics (
    app          text    NOT NULL,
    person_id    text    NOT NULL,
    funnel       text    NOT NULL,
    cohort_day   date    NOT NULL,
    lingering_us bigint,              -- not completed: from their highest step to their last event in the window
    next_label   text,                -- not completed: first event after it labelled otherwise (NULL: none)
    label_steps  integer[] NOT NULL,  -- with labels: 1-based index of the transition's first step
    labels       text[]    NOT NULL,  -- event labels done on that transition (not step labels), distinct
    PRIMARY KEY (app, person_id, funnel)
);

-- Per funnel, cohort day and step: persons who dropped there (highest
-- required step, window closed, not excluded) and how long each lingered,
-- ascending, so a range's percentiles are exact.
CREATE TABLE funnel_step_lingering (
    funnel       text     NOT NULL,
    app          text     NOT NULL,
    cohort_day   date     NOT NULL,
    step_index   integer  NOT NULL,
    step_name    text     NOT NULL,
    dropped      integer  NOT NULL,
    lingering_us bigint[] NOT NULL,
    PRIMARY KEY (funnel, cohort_day, step_index)
);

-- Per funnel, cohort day and step: what those who dropped there did next.
CREATE TABLE funnel_dropoff_next (
    funnel     text    NOT NULL,
    app        text    NOT NULL,
    cohort_day date    NOT NULL,
    step_index integer NOT NULL,
    step_name  text    NOT NULL,
    label      text    NOT NULL,   -- '(no further events)' when nothing followed in the window
    persons    integer NOT NULL,
    PRIMARY KEY (funnel, cohort_day, step_index, label)
);

-- Per funnel, cohort day and transition: persons who converted and dropped,
-- overall (kind 'all') and having each candidate (a breakdown value at their
-- start, or an event label done on the transition).
CREATE TABLE funnel_driver_counts (
    funnel     text    NOT NULL,
    app        text    NOT NULL,
    cohort_day date    NOT NULL,
    from_index integer NOT NULL,
    to_index   integer NOT NULL,
    kind       text    NOT NULL CHECK (kind IN ('all', 'breakdown', 'event')),
    dimension  text    NOT NULL,   -- '' for 'all' and 'event'
    value      text    NOT NULL,   -- '' for 'all'
    converted  integer NOT NULL,
    dropped    integer NOT NULL,
    PRIMARY KEY (funnel, cohort_day, from_index, kind, dimension, value)
);

-- Per funnel, cohort day and required step after the first: the time from
-- the previous required step along each person's chain (every person who
-- reached it, not excluded), and the lingering of those who dropped there.
CREATE VIEW analytics.funnel_step_times AS
WITH required AS (
    SELECT funnel, step_index, step_name,
           lag(step_index) OVER (PARTITION BY funnel ORDER BY step_index) AS previous_index
    FROM (SELECT DISTINCT funnel, step_index, step_name FROM funnel_daily WHERE NOT optional) s
), gaps AS (
    SELECT p.funnel, p.app, p.cohort_day, r.step_index, r.step_name, count(*) AS persons,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY g.seconds) AS median_seconds_from_previous,
           percentile_cont(0.9) WITHIN GROUP (ORDER BY g.seconds) AS p90_seconds_from_previous
    FROM funnel_persons p
    JOIN required r ON r.funnel = p.funnel AND r.previous_index IS NOT NULL
    CROSS JOIN LATERAL (SELECT ((p.step_times_us[r.step_index] - p.step_times_us[r.previous_index]) / 1e6)::float8 AS seconds) g
    WHERE NOT p.excluded AND g.seconds IS NOT NULL
    GROUP BY p.funnel, p.app, p.cohort_day, r.step_index, r.step_name
), lingering AS (
    SELECT l.funnel, l.app, l.cohort_day, l.step_index, l.step_name, l.dropped,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY u / 1e6) AS median_lingering_seconds,
           percentile_cont(0.9) WITHIN GROUP (ORDER BY u / 1e6) AS p90_lingering_seconds
    FROM funnel_step_lingering l CROSS JOIN LATERAL unnest(l.lingering_us) u
    GROUP BY l.funnel, l.app, l.cohort_day, l.step_index, l.step_name, l.dropped
)
SELECT COALESCE(g.funnel, l.funnel) AS funnel, COALESCE(g.app, l.app) AS app,
       COALESCE(g.cohort_day, l.cohort_day) AS cohort_day, COALESCE(g.step_index, l.step_index) AS step_index,
       COALESCE(g.step_name, l.step_name) AS step_name,
       COALESCE(g.persons, 0) AS persons, g.median_seconds_from_previous, g.p90_seconds_from_previous,
       COALESCE(l.dropped, 0) AS dropped, l.median_lingering_seconds, l.p90_lingering_seconds
FROM gaps g
FULL JOIN lingering l ON l.funnel = g.funnel AND l.cohort_day = g.cohort_day AND l.step_index = g.step_index;

-- Per funnel, cohort day and step: what those who dropped there did next,
-- with its share of the step's drop-offs.
CREATE VIEW analytics.funnel_dropoff_next AS
SELECT n.funnel, n.app, n.cohort_day, n.step_index, n.step_name, n.label, n.persons,
       n.persons::float8 / NULLIF(l.dropped, 0) AS share
FROM funnel_dropoff_next n
LEFT JOIN funnel_step_lingering l ON l.funnel = n.funnel AND l.cohort_day = n.cohort_day AND l.step_index = n.step_index;

-- The odds ratio of converting of a 2×2 table (a, b: having it, converted /
-- dropped; c, d: not having it, converted / dropped), 0.5 added to every
-- cell when one is zero, and the bounds of its 95 % Woolf interval,
-- exp(ln OR ± 1.96·√Σ1/cell): what `onramp report` computes, for ad-hoc SQL
-- over summed cells (analytics.funnel_drivers, sql/examples, Grafana).
CREATE FUNCTION analytics.odds_ratio(a bigint, b bigint, c bigint, d bigint) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ((a + k) * (d + k) / ((b + k) * (c + k)))::float8
    FROM (SELECT CASE WHEN least(a, b, c, d) = 0 THEN 0.5 ELSE 0 END AS k) s
$$;

CREATE FUNCTION analytics.odds_ratio_low(a bigint, b bigint, c bigint, d bigint) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT exp(ln(analytics.odds_ratio(a, b, c, d))
               - 1.959963984540054 * sqrt(1 / (a + k) + 1 / (b + k) + 1 / (c + k) + 1 / (d + k)))
    FROM (SELECT CASE WHEN least(a, b, c, d) = 0 THEN 0.5 ELSE 0 END AS k) s
$$;

CREATE FUNCTION analytics.odds_ratio_high(a bigint, b bigint, c bigint, d bigint) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT exp(ln(analytics.odds_ratio(a, b, c, d))
               + 1.959963984540054 * sqrt(1 / (a + k) + 1 / (b + k) + 1 / (c + k) + 1 / (d + k)))
    FROM (SELECT CASE WHEN least(a, b, c, d) = 0 THEN 0.5 ELSE 0 END AS k) s
$$;

-- Per funnel, cohort day, transition and candidate: the 2×2 table (having it
-- or not × converted or dropped) and the day's odds ratio of converting with
-- its 95 % Woolf interval. Fisher p-values and Benjamini–Hochberg q-values
-- are taken over a report's whole range by `onramp report`; sum the cells
-- over days to compare ranges here.
CREATE VIEW analytics.funnel_drivers AS
WITH cells AS (
    SELECT c.funnel, c.app, c.cohort_day, c.from_index, c.to_index,
           (SELECT s.step_name FROM funnel_daily s
            WHERE s.funnel = c.funnel AND s.cohort_day = c.cohort_day AND s.step_index = c.from_index) AS from_step,
           (SELECT s.step_name FROM funnel_daily s
            WHERE s.funnel = c.funnel AND s.cohort_day = c.cohort_day AND s.step_index = c.to_index) AS to_step,
           c.kind, NULLIF(c.dimension, '') AS dimension, c.value,
           c.converted AS with_converted, c.dropped AS with_dropped,
           t.converted - c.converted AS without_converted, t.dropped - c.dropped AS without_dropped
    FROM funnel_driver_counts c
    JOIN funnel_driver_counts t ON t.funnel = c.funnel AND t.cohort_day = c.cohort_day AND t.from_index = c.from_index
                               AND t.kind = 'all'
    WHERE c.kind <> 'all'
)
SELECT funnel, app, cohort_day, from_index, to_index, from_step, to_step, kind, dimension, value,
       with_converted + with_dropped AS persons, with_converted, with_dropped, without_converted, without_dropped,
       analytics.odds_ratio(with_converted, with_dropped, without_converted, without_dropped) AS odds_ratio,
       analytics.odds_ratio_low(with_converted, with_dropped, without_converted, without_dropped) AS ci_low,
       analytics.odds_ratio_high(with_converted, with_dropped, without_converted, without_dropped) AS ci_high
FROM cells;

GRANT SELECT ON analytics.funnel_step_times, analytics.funnel_dropoff_next, analytics.funnel_drivers
    TO onramp_analyst, onramp_operator;
GRANT EXECUTE ON FUNCTION analytics.odds_ratio(bigint, bigint, bigint, bigint),
    analytics.odds_ratio_low(bigint, bigint, bigint, bigint), analytics.odds_ratio_high(bigint, bigint, bigint, bigint)
    TO onramp_analyst, onramp_operator;
