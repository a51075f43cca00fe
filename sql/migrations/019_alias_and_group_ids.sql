-- 019: nothing of a Segment message is dropped. An alias's previousId (the
-- id it joins to userId) and a group call's groupId (the group the person
-- belongs to) are stored with the message, and shown to analysts under the
-- names Segment's warehouses give them (docs/ingestion.md).

ALTER TABLE events ADD COLUMN previous_id text, ADD COLUMN group_id text;

-- The same view, the two columns added at its end.
CREATE OR REPLACE VIEW analytics.events AS
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
       e.traits,
       e.previous_id,
       e.group_id
FROM events e
LEFT JOIN identity_links l ON l.app = e.app AND l.anonymous_id = e.anonymous_id;
