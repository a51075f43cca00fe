-- 021: the groups a person belongs to, from Segment's `group` calls
-- (sql/README.md): each group with its traits, and its members as persons.

-- Group calls are few beside the log: found by index, never by a scan.
CREATE INDEX events_group ON events (app, group_id) WHERE group_id IS NOT NULL;

-- One row per app and group: its traits (each trait's latest value across
-- the group's calls, as Segment's warehouses keep a group's traits), when it
-- was first and last named, how many persons it has and how many calls.
CREATE VIEW analytics.groups AS
SELECT g.app, g.group_id, coalesce(t.traits, '{}'::jsonb) AS traits, g.first_seen, g.last_seen, g.members, g.calls
FROM (
    SELECT e.app, e.group_id, min(e."timestamp") AS first_seen, max(e."timestamp") AS last_seen,
           count(DISTINCT COALESCE(e.user_id, l.user_id, e.anonymous_id)) AS members, count(*) AS calls
    FROM events e
    LEFT JOIN identity_links l ON l.app = e.app AND l.anonymous_id = e.anonymous_id
    WHERE e.group_id IS NOT NULL AND e.type = 'group'
    GROUP BY e.app, e.group_id
) g
LEFT JOIN LATERAL (
    SELECT jsonb_object_agg(latest.key, latest.value) AS traits
    FROM (
        SELECT DISTINCT ON (kv.key) kv.key, kv.value
        FROM events x CROSS JOIN LATERAL jsonb_each(x.traits) AS kv(key, value)
        WHERE x.app = g.app AND x.group_id = g.group_id AND x.type = 'group' AND jsonb_typeof(x.traits) = 'object'
        ORDER BY kv.key, x."timestamp" DESC, x.seq DESC
    ) latest
) t ON true;

-- One row per app, group and person (as analytics.events names persons):
-- when the person's group calls named it first and last.
CREATE VIEW analytics.group_members AS
SELECT e.app, e.group_id, COALESCE(e.user_id, l.user_id, e.anonymous_id) AS person_id,
       min(e."timestamp") AS first_seen, max(e."timestamp") AS last_seen
FROM events e
LEFT JOIN identity_links l ON l.app = e.app AND l.anonymous_id = e.anonymous_id
WHERE e.group_id IS NOT NULL AND e.type = 'group'
GROUP BY e.app, e.group_id, COALESCE(e.user_id, l.user_id, e.anonymous_id);

GRANT SELECT ON analytics.groups, analytics.group_members TO onramp_analyst, onramp_operator;
