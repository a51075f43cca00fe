-- 029: audiences (docs/audiences.md): standing sets of persons or groups
-- of one app, kept by every run of the nightly job and by `onramp
-- audiences run` between nights.
--
-- audience_spans holds, for every unit the job evaluated, the intervals in
-- which it is in an audience if nothing new arrives (a `stalled` wait
-- passing, a window closing, an event leaving the last days move it in or
-- out at a known instant); a run compares the members with the spans of the
-- units it evaluated and of the spans that began or ended since the last
-- run. A group's rows carry its timeline key (its id behind a unit
-- separator, as funnel_persons does); the analytics views show it as group_id.

CREATE TABLE audience_definitions (
    audience    text PRIMARY KEY,
    app         text NOT NULL,
    unit        text NOT NULL CHECK (unit IN ('person', 'group')),
    definition  text NOT NULL,
    fingerprint text NOT NULL,
    -- The zone its day counts are cut in: its app's.
    time_zone   text NOT NULL,
    -- Where its changes are delivered (docs/audiences.md, "Delivering"); a new one sends the members first.
    delivery_url text,
    built_at    timestamptz NOT NULL
);

CREATE TABLE audience_spans (
    app       text NOT NULL,
    person_id text NOT NULL,
    audience  text NOT NULL,
    enters_at timestamptz NOT NULL,
    leaves_at timestamptz,
    CHECK (leaves_at IS NULL OR leaves_at > enters_at)
);
CREATE INDEX audience_spans_unit ON audience_spans (app, person_id);
CREATE INDEX audience_spans_enters ON audience_spans (enters_at);
CREATE INDEX audience_spans_leaves ON audience_spans (leaves_at) WHERE leaves_at IS NOT NULL;

CREATE TABLE audience_members (
    audience   text NOT NULL,
    app        text NOT NULL,
    person_id  text NOT NULL,
    entered_at timestamptz NOT NULL,
    PRIMARY KEY (audience, app, person_id)
);
CREATE INDEX audience_members_unit ON audience_members (app, person_id);

CREATE TABLE audience_changes (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    audience    text NOT NULL,
    app         text NOT NULL,
    person_id   text NOT NULL,
    change      text NOT NULL CHECK (change IN ('enter', 'leave')),
    -- When it happened (a span's end, or the run that saw it), and the run that recorded it.
    at          timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL
);
CREATE INDEX audience_changes_unit ON audience_changes (app, person_id);
CREATE INDEX audience_changes_audience ON audience_changes (audience, at);

-- The delivery ledger: every change an audience's `deliver` sends, until
-- its receiver answers 2xx (delivered) or it runs out of attempts (dead).
-- Its id is the delivery id a receiver drops duplicates by.
CREATE TABLE audience_deliveries (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    audience        text NOT NULL,
    app             text NOT NULL,
    person_id       text NOT NULL,
    change          text NOT NULL CHECK (change IN ('enter', 'leave')),
    at              timestamptz NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    delivered_at    timestamptz
);
CREATE INDEX audience_deliveries_pending ON audience_deliveries (audience, id) WHERE state = 'pending';
CREATE INDEX audience_deliveries_unit ON audience_deliveries (app, person_id);

-- The clock of the last run that updated the members.
CREATE TABLE audience_runs (
    id        boolean PRIMARY KEY DEFAULT true CHECK (id),
    synced_at timestamptz NOT NULL
);

-- For analysts: the audiences, their members and changes, and per day how
-- many entered, left and were members at the day's end, of the granted apps.
CREATE VIEW analytics_internal.audiences AS
SELECT d.audience, d.app, d.unit, d.definition, d.built_at,
       (SELECT count(*) FROM audience_members m WHERE m.audience = d.audience) AS members
FROM audience_definitions d;

CREATE VIEW analytics_internal.audience_members AS
SELECT m.audience, m.app,
       CASE WHEN starts_with(m.person_id, chr(31)) THEN NULL ELSE m.person_id END AS person_id,
       CASE WHEN starts_with(m.person_id, chr(31)) THEN substr(m.person_id, 2) END AS group_id,
       m.entered_at
FROM audience_members m;

CREATE VIEW analytics_internal.audience_changes AS
SELECT c.id, c.audience, c.app,
       CASE WHEN starts_with(c.person_id, chr(31)) THEN NULL ELSE c.person_id END AS person_id,
       CASE WHEN starts_with(c.person_id, chr(31)) THEN substr(c.person_id, 2) END AS group_id,
       c.change, c.at, c.recorded_at
FROM audience_changes c;

CREATE VIEW analytics_internal.audience_daily AS
WITH days AS (
    SELECT c.audience, c.app, (c.at AT TIME ZONE d.time_zone)::date AS day,
           count(*) FILTER (WHERE c.change = 'enter') AS entered,
           count(*) FILTER (WHERE c.change = 'leave') AS left_
    FROM audience_changes c JOIN audience_definitions d ON d.audience = c.audience
    GROUP BY 1, 2, 3)
SELECT audience, app, day, entered, left_ AS "left",
       (sum(entered - left_) OVER (PARTITION BY audience ORDER BY day))::bigint AS members
FROM days;

DO $$
DECLARE
    v name;
BEGIN
    FOREACH v IN ARRAY ARRAY['audiences', 'audience_members', 'audience_changes', 'audience_daily']::name[] LOOP
        EXECUTE format(
            'CREATE VIEW analytics.%1$I WITH (security_barrier) AS SELECT * FROM analytics_internal.%1$I '
            'WHERE (SELECT public.onramp_reads_every_app()) OR app = ANY ((SELECT public.onramp_granted_apps())::text[])', v);
        EXECUTE format('GRANT SELECT ON analytics.%I TO onramp_analyst, onramp_operator, onramp_reader', v);
    END LOOP;
END
$$;

-- An erasure (onramp_privacy_erase queues the person for the next run)
-- takes the person out of every audience table at once, in its own
-- transaction: no leave is recorded or sent for them, nothing pending is
-- delivered afterwards, and the run that follows finds nothing of theirs.
-- As the owner: the erasure runs as onramp_privacy, which holds the log alone.
CREATE FUNCTION onramp_forget_audience_unit() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    DELETE FROM audience_members WHERE app = NEW.app AND person_id = NEW.person_id;
    DELETE FROM audience_changes WHERE app = NEW.app AND person_id = NEW.person_id;
    DELETE FROM audience_deliveries WHERE app = NEW.app AND person_id = NEW.person_id;
    DELETE FROM audience_spans WHERE app = NEW.app AND person_id = NEW.person_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER privacy_pending_forgets_audiences AFTER INSERT ON privacy_pending
FOR EACH ROW EXECUTE FUNCTION onramp_forget_audience_unit();
