-- The native support functions of analytics.window_funnel and of the masks'
-- aggregates funnel_report and funnel_report_persons count with. The
-- aggregates themselves are Onramp's (`onramp migrate` points them at these
-- when the extension is installed, at the PL/pgSQL fallback otherwise), so
-- their names, grants and callers never change. `internal` states: these
-- functions cannot be called from SQL, only through the aggregates.
\echo Use "CREATE EXTENSION onramp_funnel" to load this file. \quit

CREATE FUNCTION window_funnel_native_add(internal, interval, timestamptz, VARIADIC boolean[])
RETURNS internal AS 'MODULE_PATHNAME', 'onramp_window_funnel_add' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION window_funnel_native_add_mask(internal, interval, timestamptz, bigint, integer)
RETURNS internal AS 'MODULE_PATHNAME', 'onramp_window_funnel_add_mask' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION window_funnel_native_level(internal)
RETURNS integer AS 'MODULE_PATHNAME', 'onramp_window_funnel_level' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION window_funnel_native_chain(internal)
RETURNS bigint[] AS 'MODULE_PATHNAME', 'onramp_window_funnel_chain' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION window_funnel_native_combine(internal, internal)
RETURNS internal AS 'MODULE_PATHNAME', 'onramp_window_funnel_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION window_funnel_native_serialize(internal)
RETURNS bytea AS 'MODULE_PATHNAME', 'onramp_window_funnel_serialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION window_funnel_native_deserialize(bytea, internal)
RETURNS internal AS 'MODULE_PATHNAME', 'onramp_window_funnel_deserialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
