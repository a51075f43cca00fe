-- 018: what query-time tools read as onramp_analyst, so they can run against
-- a replica (docs/explore.md): the log as stored, and the apps it holds.

-- The log's rows with their writing transaction's id: a reader that keeps
-- the log's columns (`onramp funnel`, `onramp explore`) reads only the rows
-- committed since its last read, as the nightly job does.
CREATE VIEW analytics.event_log AS
SELECT e.app, e.type, e.message_id, e.event, e.anonymous_id, e.user_id, e."timestamp",
       e.properties, e.context, e.traits, e.received_at, e.txid
FROM events e;

-- Every app with events, found by skipping through the (app, anonymous_id)
-- index one app at a time rather than scanning the log.
CREATE VIEW analytics.apps AS
WITH RECURSIVE found (app) AS (
    (SELECT app FROM events ORDER BY app LIMIT 1)
    UNION ALL
    SELECT (SELECT e.app FROM events e WHERE e.app > f.app ORDER BY e.app LIMIT 1)
    FROM found f WHERE f.app IS NOT NULL
)
SELECT app FROM found WHERE app IS NOT NULL;

GRANT SELECT ON analytics.event_log, analytics.apps TO onramp_analyst, onramp_operator;
