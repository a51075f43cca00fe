-- 033: whether a login reads every app, for a login named by the caller.
--
-- The guard on counts (extensions/onramp_funnel/explain_guard.c,
-- docs/access.md "Counts") asks it as an instrumented plan starts. Asked
-- there of session_user, the question could get the wrong login: on Citus
-- the grants' reference table may be read over another connection, made as
-- this function's owner, whose session_user is the owner. Named, the login
-- travels with the question. The views' own check asks it of session_user,
-- so the two never disagree.

CREATE FUNCTION onramp_reads_every_app(login name) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT coalesce((
        SELECT r.rolsuper
            OR r.oid = (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'analytics')
            OR EXISTS (SELECT 1 FROM app_grants g WHERE g.login = r.oid AND g.login_name = r.rolname AND g.app IS NULL)
        FROM pg_roles r WHERE r.rolname = login), false)
$$;
-- Whom another login is granted is the owner's business: the guard calls it
-- from C, where no privilege is checked.
REVOKE EXECUTE ON FUNCTION onramp_reads_every_app(name) FROM PUBLIC;

CREATE OR REPLACE FUNCTION onramp_reads_every_app() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT onramp_reads_every_app(session_user)
$$;
