-- 015: what each funnel's stored rows were built from. The nightly job
-- keeps one row per configured funnel, written when it computes the funnel
-- from the whole log: the definition (app, steps and their matchers,
-- exclusions, window, breakdowns, the funnel's options, retention days and
-- active events, the cohort days' time zone) as JSON, and a short
-- fingerprint of it. A run whose configuration differs recomputes that
-- funnel from the whole log, and one that no longer configures a funnel
-- removes its rows (docs/operations.md, "Changing the funnels").
CREATE TABLE funnel_definitions (
    funnel      text        PRIMARY KEY,
    app         text        NOT NULL,
    fingerprint text        NOT NULL,
    definition  jsonb       NOT NULL,
    built_at    timestamptz NOT NULL   -- when its rows were last computed from the whole log
);

CREATE VIEW analytics.funnel_definitions AS
SELECT funnel, app, fingerprint, definition, built_at FROM funnel_definitions;

GRANT SELECT ON analytics.funnel_definitions TO onramp_analyst, onramp_operator;
