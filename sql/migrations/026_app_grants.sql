-- 026: each login reads only the apps it is granted (docs/access.md).
-- Grants live in app_grants, which only the owner reads and writes
-- (`onramp access`). Every relation in `analytics` becomes a security-barrier
-- view over the view it was, now in the closed schema analytics_internal,
-- keeping only the rows of the apps the session's login is granted. The key
-- is session_user, the login that authenticated: a view keeps the caller as
-- current_user, but a member of onramp_analyst may SET ROLE to it and a
-- SECURITY DEFINER function switches current_user to its owner; neither
-- changes session_user, which only a superuser can.

CREATE TABLE app_grants (
    -- The login's role, by OID: a role dropped and made again under the same
    -- name does not inherit the old one's grants.
    login      oid         NOT NULL,
    -- Its name when granted: what a Citus worker, whose role OIDs differ,
    -- checks (sql/citus/distribute.sql).
    login_name name        NOT NULL,
    -- NULL: every app, today's and those to come.
    app        text,
    granted_at timestamptz NOT NULL DEFAULT now(),
    granted_by text        NOT NULL DEFAULT session_user,
    UNIQUE NULLS NOT DISTINCT (login, app)
);

-- The owner (the role that ran `onramp migrate`) and superusers read every
-- app without a grant: the job, the server and erasure read the tables
-- behind these views as the owner, or do not read them at all.
CREATE FUNCTION onramp_reads_every_app() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT r.rolsuper
        OR r.oid = (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'analytics')
        OR EXISTS (SELECT 1 FROM app_grants g WHERE g.login = r.oid AND g.login_name = r.rolname AND g.app IS NULL)
    FROM pg_roles r WHERE r.rolname = session_user
$$;

-- The apps the session's login is granted one by one. A grant holds for
-- the role it was given to under the name it had: a role renamed, or dropped
-- and made again, holds none (`onramp access` clears such rows).
CREATE FUNCTION onramp_granted_apps() RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT coalesce(array_agg(g.app ORDER BY g.app), '{}')
    FROM app_grants g JOIN pg_roles r ON r.oid = g.login AND r.rolname = g.login_name
    WHERE r.rolname = session_user AND g.app IS NOT NULL
$$;

-- Upgrade without surprise: the two roles, and every login that is a member
-- of either now, read every app as before. Logins made later read only what
-- they are granted.
INSERT INTO app_grants (login, login_name, app, granted_by)
SELECT r.oid, r.rolname, NULL, 'migration 026'
FROM pg_roles r
WHERE r.rolname IN ('onramp_analyst', 'onramp_operator')
   OR (r.rolcanlogin AND NOT r.rolsuper AND r.rolname <> current_user
       AND (pg_has_role(r.oid, 'onramp_analyst', 'MEMBER') OR pg_has_role(r.oid, 'onramp_operator', 'MEMBER')))
ON CONFLICT DO NOTHING;

-- What `onramp access create-login` makes its logins members of: it may
-- read analytics, and holds no app itself. A login that holds some apps is
-- not a member of onramp_analyst or onramp_operator, which hold every app,
-- so SET ROLE gives it no more than it has (on Citus, where a worker sees
-- the role the coordinator sent the query as, that is what keeps it in).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'onramp_reader') THEN
        CREATE ROLE onramp_reader NOLOGIN;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA analytics TO onramp_reader;

-- The views as they were, out of the analysts' reach.
CREATE SCHEMA analytics_internal;

-- Erasures per app: what a reader of one app's events (the explorer's
-- store) watches to know its copy still matches the log.
CREATE VIEW analytics.app_erasures AS
SELECT app, count(*) AS erasures FROM privacy_requests WHERE kind = 'erase' GROUP BY app;

DO $$
DECLARE
    v name;
BEGIN
    FOR v IN
        SELECT c.relname FROM pg_class c
        WHERE c.relnamespace = 'analytics'::regnamespace AND c.relkind = 'v' AND c.relname <> 'log_erasures'
        ORDER BY c.relname
    LOOP
        EXECUTE format('ALTER VIEW analytics.%I SET SCHEMA analytics_internal', v);
        EXECUTE format(
            'CREATE VIEW analytics.%1$I WITH (security_barrier) AS SELECT * FROM analytics_internal.%1$I '
            'WHERE (SELECT public.onramp_reads_every_app()) OR app = ANY ((SELECT public.onramp_granted_apps())::text[])', v);
        EXECUTE format('GRANT SELECT ON analytics.%I TO onramp_analyst, onramp_operator, onramp_reader', v);
    END LOOP;
END
$$;

-- The one view without an app column: erasures of the granted apps alone.
CREATE OR REPLACE VIEW analytics.log_erasures WITH (security_barrier) AS
SELECT count(*) AS erasures FROM privacy_requests
WHERE kind = 'erase'
  AND ((SELECT onramp_reads_every_app()) OR app = ANY ((SELECT onramp_granted_apps())::text[]));
GRANT SELECT ON analytics.log_erasures TO onramp_reader;

-- `onramp access create-login`: a member of onramp_reader with
-- onramp_analyst's role settings (read-only, statement timeout, search
-- path), which members would not inherit. The name is quoted here
-- (format's %I); the password comes already encrypted by the client. It
-- starts with no grant (rows a role dropped or renamed left under its name
-- hold nothing: they name another OID, and `onramp access` clears them).
CREATE FUNCTION onramp_create_login(login text, encrypted_password text) RETURNS oid
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    name text;
    value text;
BEGIN
    EXECUTE format('CREATE ROLE %I LOGIN PASSWORD %L IN ROLE onramp_reader', login, encrypted_password);
    -- Each setting as PostgreSQL holds it, a list (a search path) given
    -- element by element. (Not `FROM CURRENT`, which Citus cannot pass on
    -- to its workers.)
    FOR name, value IN
        SELECT split_part(c, '=', 1), substr(c, strpos(c, '=') + 1)
        FROM pg_db_role_setting s, unnest(s.setconfig) AS c
        WHERE s.setrole = (SELECT oid FROM pg_roles WHERE rolname = 'onramp_analyst') AND s.setdatabase = 0
    LOOP
        EXECUTE format('ALTER ROLE %I SET %I = %s', login, name,
            CASE WHEN lower(name) IN ('search_path', 'temp_tablespaces', 'datestyle', 'session_preload_libraries', 'local_preload_libraries')
                 THEN (SELECT string_agg(quote_literal(trim(both ' "' FROM x)), ', ') FROM unnest(string_to_array(value, ',')) AS x)
                 ELSE quote_literal(value) END);
    END LOOP;
    RETURN (SELECT oid FROM pg_roles WHERE rolname = login);
END
$$;
REVOKE EXECUTE ON FUNCTION onramp_create_login(text, text) FROM PUBLIC;
