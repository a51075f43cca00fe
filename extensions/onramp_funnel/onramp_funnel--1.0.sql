-- The native support functions of analytics.window_funnel and of the masks'
-- aggregates analytics.funnel_report and funnel_report_persons count with
-- (onramp_funnel.c). The aggregates themselves are Onramp's: `onramp
-- migrate` points them at these functions when the extension is installed
-- and leaves them on the PL/pgSQL fallback otherwise, so their names, grants
-- and callers never change. The functions run only inside those aggregates
-- (a direct call is refused) and check every state they are handed; they
-- are executable by all, as the aggregates are: on Citus the coordinator
-- combines the workers' partial states by calling them as the querying role.
\echo Use "CREATE EXTENSION onramp_funnel" to load this file. \quit

CREATE FUNCTION window_funnel_native_add(bytea, interval, timestamptz, VARIADIC boolean[])
RETURNS bytea AS 'MODULE_PATHNAME', 'onramp_window_funnel_add' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION window_funnel_native_add_mask(bytea, interval, timestamptz, bigint, integer)
RETURNS bytea AS 'MODULE_PATHNAME', 'onramp_window_funnel_add_mask' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION window_funnel_native_level(bytea)
RETURNS integer AS 'MODULE_PATHNAME', 'onramp_window_funnel_level' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION window_funnel_native_chain(bytea)
RETURNS bigint[] AS 'MODULE_PATHNAME', 'onramp_window_funnel_chain' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION window_funnel_native_combine(bytea, bytea)
RETURNS bytea AS 'MODULE_PATHNAME', 'onramp_window_funnel_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
