-- 003: the stable, read-only `analytics` schema for analysts and dashboards,
-- and the roles that read it. Documented in sql/README.md. Views, not tables:
-- they read the log and the job's tables with the owner's rights, so the
-- analyst role needs no access to anything outside this schema.

CREATE SCHEMA analytics;

-- Roles are cluster-wide: create them once, whichever database migrates first.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'onramp_analyst') THEN
        -- LOGIN without a password: it can log in only once an operator sets one
        -- (or where pg_hba trusts it), e.g. for Grafana's data source.
        CREATE ROLE onramp_analyst LOGIN NOINHERIT;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'onramp_operator') THEN
        CREATE ROLE onramp_operator LOGIN;
    END IF;
END $$;

-- Read-only, bounded, and looking only at analytics by default. People who get
-- their own login (see README) get the same settings on their role.
ALTER ROLE onramp_analyst SET default_transaction_read_only = on;
ALTER ROLE onramp_analyst SET statement_timeout = '60s';
ALTER ROLE onramp_analyst SET search_path = analytics;

-- Functions in public are executable by everyone unless revoked.
REVOKE EXECUTE ON FUNCTION onramp_ensure_event_partitions(integer, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION onramp_append_only() FROM PUBLIC;

-- One row per stored event, with the common context fields as typed columns.
CREATE VIEW analytics.events AS
SELECT e.seq,
       e.app,
       e.type,
       e.message_id,
       e.event,
       COALESCE(e.user_id, l.user_id, e.anonymous_id) AS person_id,
       e.anonymous_id,
       e.user_id,
       e."timestamp",
       e.original_timestamp,
       e.sent_at,
       e.received_at,
       e.context #>> '{os,name}'     AS os_name,
       e.context #>> '{os,version}'  AS os_version,
       e.context #>> '{app,version}' AS app_version,
       e.context #>> '{device,type}' AS device_type,
       e.context ->> 'locale'        AS locale,
       e.properties,
       e.context,
       e.traits
FROM events e
LEFT JOIN identity_links l ON l.app = e.app AND l.anonymous_id = e.anonymous_id;

-- One row per funnel and person who reached step 1 (as of the last job run).
CREATE VIEW analytics.funnel_persons AS
SELECT p.funnel,
       p.app,
       p.person_id,
       p.cohort_day,
       p.level,
       p.last_step_index,
       p.last_step_name,
       p.completed,
       p.in_progress,
       p.excluded,
       p.start_time,
       p.chain_start_time,
       p.completion_time,
       p.seconds_to_complete,
       ARRAY(SELECT CASE WHEN t IS NULL THEN NULL ELSE to_timestamp(t / 1000000.0) END
             FROM unnest(p.step_times_us) WITH ORDINALITY AS u(t, n) ORDER BY n) AS step_times,
       p.optional_steps_done,
       p.breakdown,
       p.breakdown ->> 'context.os.name'     AS os_name,
       p.breakdown ->> 'context.app.version' AS app_version
FROM funnel_persons p;

-- Per funnel, cohort day and configured step.
CREATE VIEW analytics.funnel_daily AS
SELECT funnel, app, cohort_day, step_index, step_name, optional, persons, drop_off, in_progress,
       conversion_from_previous, conversion_from_start, median_seconds_from_previous
FROM funnel_daily;

-- Per funnel and cohort day.
CREATE VIEW analytics.funnel_cohorts AS
SELECT funnel, app, cohort_day, started, completed, in_progress_persons, excluded_persons, completion_rate,
       completion_ci_low, completion_ci_high, median_seconds_to_complete, p90_seconds_to_complete,
       in_progress AS window_open
FROM funnel_cohorts;

-- Per funnel and step, over every cohort day.
CREATE VIEW analytics.funnel_steps AS
WITH totals AS (
    SELECT funnel, app, step_index, step_name, optional,
           sum(persons)::bigint AS persons, sum(drop_off)::bigint AS drop_off, sum(in_progress)::bigint AS in_progress
    FROM funnel_daily
    GROUP BY funnel, app, step_index, step_name, optional
)
SELECT funnel, app, step_index, step_name, optional, persons, drop_off, in_progress,
       CASE WHEN optional THEN NULL
            ELSE persons::float8 / NULLIF(COALESCE(lag(persons) OVER (PARTITION BY funnel, optional ORDER BY step_index), persons), 0)
       END AS conversion_from_previous,
       CASE WHEN optional THEN NULL
            ELSE persons::float8 / NULLIF(first_value(persons) OVER (PARTITION BY funnel, optional ORDER BY step_index), 0)
       END AS conversion_from_start
FROM totals;

-- Statistics helpers, so ad-hoc SQL reports rates the way the job does.
-- Standard normal CDF (Abramowitz & Stegun 7.1.26 for erf; |error| < 1.5e-7).
CREATE FUNCTION analytics.normal_cdf(z double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN z IS NULL THEN NULL ELSE
        0.5 * (1 + sign(z) * (1 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
                                    + 0.254829592) * t * exp(-x * x)))
    END
    FROM (SELECT abs(z) / sqrt(2) AS x, 1 / (1 + 0.3275911 * abs(z) / sqrt(2)) AS t) AS a
$$;

-- 95 % Wilson score interval bounds for k successes of n.
CREATE FUNCTION analytics.wilson_low(k bigint, n bigint) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN n > 0 THEN
        (k::float8 / n + 1.959963984540054^2 / (2 * n)
         - 1.959963984540054 * sqrt(k::float8 / n * (1 - k::float8 / n) / n + 1.959963984540054^2 / (4 * n * n)))
        / (1 + 1.959963984540054^2 / n) END
$$;

CREATE FUNCTION analytics.wilson_high(k bigint, n bigint) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN n > 0 THEN
        (k::float8 / n + 1.959963984540054^2 / (2 * n)
         + 1.959963984540054 * sqrt(k::float8 / n * (1 - k::float8 / n) / n + 1.959963984540054^2 / (4 * n * n)))
        / (1 + 1.959963984540054^2 / n) END
$$;

-- Two-sided p-value of the pooled two-proportion z-test (k1 of n1 vs k2 of n2).
CREATE FUNCTION analytics.two_proportion_p(k1 bigint, n1 bigint, k2 bigint, n2 bigint) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN se > 0 THEN 2 * (1 - analytics.normal_cdf(abs((k1::float8 / n1 - k2::float8 / n2) / se))) END
    FROM (SELECT CASE WHEN n1 > 0 AND n2 > 0 THEN
                 sqrt(((k1 + k2)::float8 / (n1 + n2)) * (1 - (k1 + k2)::float8 / (n1 + n2)) * (1.0 / n1 + 1.0 / n2))
                 END AS se) AS s
$$;

-- The analyst reads analytics and nothing else.
GRANT USAGE ON SCHEMA analytics TO onramp_analyst;
GRANT SELECT ON ALL TABLES IN SCHEMA analytics TO onramp_analyst;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA analytics TO onramp_analyst;

-- The operator also sees the quarantine (reasons and raw payloads) to fix clients.
GRANT USAGE ON SCHEMA analytics TO onramp_operator;
GRANT SELECT ON ALL TABLES IN SCHEMA analytics TO onramp_operator;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA analytics TO onramp_operator;
GRANT SELECT ON quarantine TO onramp_operator;
