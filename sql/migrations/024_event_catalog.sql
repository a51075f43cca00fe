-- 024: the event catalogue (docs/tracking-health.md): what each app sends,
-- kept by the nightly job. Every message type counts (track events and
-- screens by name, identify, group and alias as themselves, under an empty
-- name), in the day its timestamp falls on in the app's time zone.

-- Per label, day, app version and OS: events, persons, first and last seen.
-- Each run adds its new events.
CREATE TABLE event_catalog_days (
    app         text        NOT NULL,
    type        text        NOT NULL,
    event       text        NOT NULL,   -- '' for identify, group and alias
    day         date        NOT NULL,
    app_version text        NOT NULL,   -- context.app.version, '' without one
    os_name     text        NOT NULL,   -- context.os.name, '' without one
    events      bigint      NOT NULL,
    persons     bigint      NOT NULL,   -- ids that sent them: the user id, else the anonymous id
    first_seen  timestamptz NOT NULL,
    last_seen   timestamptz NOT NULL,
    PRIMARY KEY (app, type, event, day, app_version, os_name)
);

-- Per label and app version: every path under `properties` (nested objects
-- followed four levels down), with each JSON type it was seen with. Summed
-- over the events of each run.
CREATE TABLE event_catalog_properties (
    app         text        NOT NULL,
    type        text        NOT NULL,
    event       text        NOT NULL,
    app_version text        NOT NULL,
    path        text        NOT NULL,   -- e.g. properties.flow, properties.plan.tier
    json_type   text        NOT NULL,   -- jsonb_typeof: string, number, boolean, object, array, null
    events      bigint      NOT NULL,
    first_seen  timestamptz NOT NULL,
    last_seen   timestamptz NOT NULL,
    PRIMARY KEY (app, type, event, app_version, path, json_type)
);

-- Per app, day and sender (a hash of the user id, else the anonymous id):
-- the keys (label, version, OS, hashed) it was counted under that day, so a
-- run counts a sender once per key without reading older events.
CREATE TABLE event_catalog_senders (
    app    text    NOT NULL,
    day    date    NOT NULL,
    sender bigint  NOT NULL,
    keys   bigint[] NOT NULL,
    PRIMARY KEY (app, day, sender)
);

-- How the catalogue's days were cut (each app's time zone): another cut is counted again whole.
CREATE TABLE event_catalog_state (
    only_row    boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
    zones       text        NOT NULL
);

-- The label as a funnel step names it: `event: X`, `screen: X`, `page: X`, or the type.
CREATE FUNCTION onramp_event_label(type text, event text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN event = '' THEN type WHEN type = 'track' THEN 'event: ' || event ELSE type || ': ' || event END
$$;

CREATE VIEW analytics.event_catalog AS
SELECT app, onramp_event_label(type, event) AS label, type, NULLIF(event, '') AS event, day,
       NULLIF(app_version, '') AS app_version, NULLIF(os_name, '') AS os_name,
       events, persons, first_seen, last_seen
FROM event_catalog_days;

-- Share: of the label's events in that app version, those carrying the path with that type.
CREATE VIEW analytics.event_properties AS
SELECT p.app, onramp_event_label(p.type, p.event) AS label, p.type, NULLIF(p.event, '') AS event,
       NULLIF(p.app_version, '') AS app_version, p.path, p.json_type, p.events,
       round(p.events::numeric / NULLIF(t.events, 0), 4) AS share, p.first_seen, p.last_seen
FROM event_catalog_properties p
LEFT JOIN (
    SELECT app, type, event, app_version, sum(events) AS events
    FROM event_catalog_days GROUP BY app, type, event, app_version
) t USING (app, type, event, app_version);

GRANT SELECT ON analytics.event_catalog, analytics.event_properties TO onramp_analyst, onramp_operator;
GRANT EXECUTE ON FUNCTION onramp_event_label(text, text) TO onramp_analyst, onramp_operator;

-- What the last report over every cohort day found of each funnel's
-- instrumentation, beside funnel_regressions (and replaced with it).
CREATE TABLE funnel_instrumentation (
    funnel          text        NOT NULL,
    app             text        NOT NULL,
    checked_at      timestamptz NOT NULL,
    kind            text        NOT NULL CHECK (kind IN ('event_vanished', 'event_vanished_on_platform', 'step_unmatched',
                                                         'property_vanished', 'property_type_changed')),
    step            text        NOT NULL,
    events          text[]      NOT NULL,   -- the labels the step matches
    path            text,                   -- property findings
    platform        text,                   -- event_vanished_on_platform
    baseline        text        NOT NULL,   -- the version before, or the day last seen
    recent          text        NOT NULL,   -- the newest version, or the closed days without
    baseline_events bigint      NOT NULL,
    recent_events   bigint      NOT NULL,
    recent_starters bigint      NOT NULL,
    baseline_type   text,
    recent_type     text,
    description     text        NOT NULL
);
CREATE INDEX funnel_instrumentation_funnel ON funnel_instrumentation (funnel);

CREATE VIEW analytics.funnel_instrumentation AS
SELECT funnel, app, checked_at, kind, step, events, path, platform, baseline, recent, baseline_events, recent_events,
       recent_starters, baseline_type, recent_type, description
FROM funnel_instrumentation;

-- A regression an instrumentation finding likely explains says which.
ALTER TABLE funnel_regressions ADD COLUMN likely_instrumentation text;
CREATE OR REPLACE VIEW analytics.funnel_regressions AS
SELECT funnel, app, checked_at, direction, kind, metric, step,
       baseline_label, baseline_value, baseline_persons, baseline_ci_low, baseline_ci_high,
       recent_label, recent_value, recent_persons, recent_ci_low, recent_ci_high,
       difference, p_value, q_value, likely_instrumentation
FROM funnel_regressions;

GRANT SELECT ON analytics.funnel_instrumentation TO onramp_analyst, onramp_operator;

-- The apps' tracking plans, as configured (written by every run), and what
-- the catalogue holds against them: nothing is refused for it unless the
-- app enforces its plan, when ingestion quarantines the message instead.
CREATE TABLE tracking_plan_events (
    app     text    NOT NULL,
    type    text    NOT NULL,   -- track or screen
    event   text    NOT NULL,
    enforce boolean NOT NULL,
    PRIMARY KEY (app, type, event)
);
CREATE TABLE tracking_plan_properties (
    app       text NOT NULL,
    type      text NOT NULL,
    event     text NOT NULL,
    path      text NOT NULL,    -- properties.method
    json_type text NOT NULL,
    PRIMARY KEY (app, type, event, path)
);

-- One row per rule broken, label and app version: events the plan does not
-- name (of apps with a plan), planned events without a required property
-- (or with it null), and required properties of another JSON type.
CREATE VIEW analytics.tracking_violations AS
SELECT d.app, onramp_event_label(d.type, d.event) AS label, NULLIF(d.app_version, '') AS app_version,
       'unplanned_event'::text AS rule, NULL::text AS property, NULL::text AS expected_type, NULL::text AS seen_type,
       sum(d.events)::bigint AS events, min(d.first_seen) AS first_seen, max(d.last_seen) AS last_seen
FROM event_catalog_days d
WHERE d.type IN ('track', 'screen')
  AND EXISTS (SELECT 1 FROM tracking_plan_events a WHERE a.app = d.app)
  AND NOT EXISTS (SELECT 1 FROM tracking_plan_events p WHERE p.app = d.app AND p.type = d.type AND p.event = d.event)
GROUP BY d.app, d.type, d.event, d.app_version
UNION ALL
SELECT r.app, onramp_event_label(r.type, r.event), NULLIF(t.app_version, ''), 'missing_property', r.path, r.json_type, NULL,
       t.events - COALESCE(c.events, 0), t.first_seen, t.last_seen
FROM tracking_plan_properties r
JOIN (
    SELECT app, type, event, app_version, sum(events)::bigint AS events, min(first_seen) AS first_seen, max(last_seen) AS last_seen
    FROM event_catalog_days GROUP BY app, type, event, app_version
) t ON t.app = r.app AND t.type = r.type AND t.event = r.event
LEFT JOIN (
    SELECT app, type, event, app_version, path, sum(events)::bigint AS events
    FROM event_catalog_properties WHERE json_type <> 'null' GROUP BY app, type, event, app_version, path
) c ON c.app = r.app AND c.type = r.type AND c.event = r.event AND c.app_version = t.app_version AND c.path = r.path
WHERE t.events > COALESCE(c.events, 0)
UNION ALL
SELECT r.app, onramp_event_label(r.type, r.event), NULLIF(p.app_version, ''), 'wrong_type', r.path, r.json_type, p.json_type,
       p.events, p.first_seen, p.last_seen
FROM tracking_plan_properties r
JOIN event_catalog_properties p
  ON p.app = r.app AND p.type = r.type AND p.event = r.event AND p.path = r.path AND p.json_type NOT IN (r.json_type, 'null');

GRANT SELECT ON analytics.tracking_violations TO onramp_analyst, onramp_operator;
