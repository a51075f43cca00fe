-- 028: the persons behind a number of any funnel given as JSON
-- (docs/funnels.md, "The persons behind a number"), beside
-- analytics.funnel_report, which accepts the same definitions: what both
-- accept is checked by one function.
--
--   SELECT * FROM analytics.funnel_report_persons('{"app": "yoked", "window": "1h",
--     "steps": [{"event": "phone_entered"}, {"event": "otp_verified"}]}', 1, 'dropped');

-- What analytics.funnel_report and analytics.funnel_report_persons accept
-- of a definition, checked once for both: the app, the window, the steps'
-- matchers (for the scan: every name they match) and the steps' names as the
-- engine gives them. Refusals name `caller` and the field.
CREATE FUNCTION analytics.funnel_sql_definition(
    definition jsonb, caller text,
    OUT app text, OUT window_length interval, OUT step_count integer, OUT step_matchers jsonb, OUT event_names text[], OUT step_names text[])
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    app_name text;
    win interval := interval '24 hours';
    window_text text;
    window_parts text[];
    step jsonb;
    alternative jsonb;
    alternatives jsonb;
    field text;
    key text;
    path text;
    n integer;
    matchers jsonb := '[]';      -- [{step, kind, name, conditions}]
    names text[] := '{}';        -- every matcher's event or screen name, for the scan
    explicit boolean[] := '{}';
    plain text[] := '{}';
    detailed text[] := '{}';
    labels text[];
    label_parts text[];
    detail_parts text[];
    filters text[];
    conditions jsonb;
BEGIN
    IF definition IS NULL OR jsonb_typeof(definition) <> 'object' THEN
        RAISE EXCEPTION '%: the definition must be a JSON object (a funnel as in the YAML configuration)', caller
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR key IN SELECT jsonb_object_keys(definition) LOOP
        IF key IN ('exclude', 'hold') OR (key = 'order' AND definition ->> 'order' IS DISTINCT FROM 'ordered') THEN
            RAISE EXCEPTION '%: %: not supported in SQL (onramp funnel answers it)', caller, key
                USING ERRCODE = 'feature_not_supported';
        ELSIF key NOT IN ('name', 'app', 'window', 'steps', 'order', 'description', 'breakdowns', 'targets',
                          'diagnostics', 'alerts', 'retention', 'attribution', 'ignore') THEN
            RAISE EXCEPTION '%: %: unknown field (expected name, app, window, steps, order, …)', caller, key
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    app_name := definition ->> 'app';
    IF app_name IS NULL OR app_name = '' OR jsonb_typeof(definition -> 'app') <> 'string' THEN
        RAISE EXCEPTION '%: app: missing (expected the app''s name as a string)', caller USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF definition ? 'window' THEN
        window_text := btrim(definition ->> 'window');
        window_parts := regexp_match(window_text, '^([0-9]{1,10})([smhd]?)$');
        -- At most a century, as the configuration allows.
        IF window_parts IS NULL OR window_parts[1]::bigint = 0
           OR window_parts[1]::bigint * (CASE window_parts[2] WHEN 'm' THEN 60 WHEN 'h' THEN 3600 WHEN 'd' THEN 86400 ELSE 1 END)
              > 100::bigint * 366 * 86400 THEN
            RAISE EXCEPTION '%: window: cannot parse ''%'' (expected e.g. 24h, 30m, 90s, 2d or whole seconds)', caller, window_text
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        win := window_parts[1]::bigint * CASE window_parts[2] WHEN 'm' THEN interval '1 minute' WHEN 'h' THEN interval '1 hour'
                                                             WHEN 'd' THEN interval '1 day' ELSE interval '1 second' END;
    END IF;
    IF jsonb_typeof(definition -> 'steps') IS DISTINCT FROM 'array' OR jsonb_array_length(definition -> 'steps') = 0 THEN
        RAISE EXCEPTION '%: steps: missing (expected a list of at least one step)', caller USING ERRCODE = 'invalid_parameter_value';
    END IF;
    n := jsonb_array_length(definition -> 'steps');
    IF n > 63 THEN
        RAISE EXCEPTION '%: steps: at most 63 (got %)', caller, n USING ERRCODE = 'invalid_parameter_value';
    END IF;

    FOR i IN 1 .. n LOOP
        step := definition -> 'steps' -> (i - 1);
        field := format('steps[%s]', i - 1);
        IF jsonb_typeof(step) IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION '%: %: expected a step such as {"event": "otp_verified"}', caller, field USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR key IN SELECT jsonb_object_keys(step) LOOP
            IF key IN ('optional', 'within') THEN
                RAISE EXCEPTION '%: %.%: not supported in SQL (onramp funnel answers it)', caller, field, key
                    USING ERRCODE = 'feature_not_supported';
            ELSIF key NOT IN ('name', 'event', 'screen', 'where', 'any_of') THEN
                RAISE EXCEPTION '%: %.%: unknown field (expected name, event, screen, where or any_of)', caller, field, key
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
        IF step ? 'any_of' THEN
            IF step ? 'event' OR step ? 'screen' OR step ? 'where' THEN
                RAISE EXCEPTION '%: %.any_of: cannot be combined with event, screen or where (put them inside each alternative)', caller, field
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF jsonb_typeof(step -> 'any_of') IS DISTINCT FROM 'array' OR jsonb_array_length(step -> 'any_of') = 0 THEN
                RAISE EXCEPTION '%: %.any_of: must list at least one matcher', caller, field USING ERRCODE = 'invalid_parameter_value';
            END IF;
            alternatives := step -> 'any_of';
        ELSE
            alternatives := jsonb_build_array(step - 'name');
        END IF;
        label_parts := '{}';
        detail_parts := '{}';
        FOR a IN 0 .. jsonb_array_length(alternatives) - 1 LOOP
            alternative := alternatives -> a;
            IF step ? 'any_of' THEN
                field := format('steps[%s].any_of[%s]', i - 1, a);
            END IF;
            IF jsonb_typeof(alternative) IS DISTINCT FROM 'object'
               OR (alternative ? 'event') = (alternative ? 'screen')
               OR coalesce(alternative ->> 'event', alternative ->> 'screen', '') = ''
               OR jsonb_typeof(coalesce(alternative -> 'event', alternative -> 'screen')) <> 'string'
               OR EXISTS (SELECT 1 FROM jsonb_object_keys(alternative) AS k WHERE k NOT IN ('event', 'screen', 'where')) THEN
                RAISE EXCEPTION '%: %: expected an ''event'' or a ''screen'' name (and optionally ''where'')', caller, field
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            conditions := '[]';
            filters := '{}';
            IF alternative ? 'where' THEN
                IF jsonb_typeof(alternative -> 'where') IS DISTINCT FROM 'object' THEN
                    RAISE EXCEPTION '%: %.where: expected a mapping of path to value', caller, field USING ERRCODE = 'invalid_parameter_value';
                END IF;
                -- In code-point order, as the engine sorts them for a step's name, whatever the database's collation.
                FOR path IN SELECT k FROM jsonb_object_keys(alternative -> 'where') AS k ORDER BY k COLLATE "C" LOOP
                    IF NOT (path ~ '^(properties|context|traits)\.' AND right(path, 1) <> '.' AND strpos(path, '..') = 0) THEN
                        RAISE EXCEPTION '%: %.where: ''%'' is not a path under properties., context. or traits. (such as context.os.name)', caller, field, path
                            USING ERRCODE = 'invalid_parameter_value';
                    END IF;
                    IF jsonb_typeof(alternative -> 'where' -> path) IN ('object', 'array', 'null') THEN
                        RAISE EXCEPTION '%: %.where.%: expected a single value to compare with', caller, field, path
                            USING ERRCODE = 'invalid_parameter_value';
                    END IF;
                    conditions := conditions || jsonb_build_array(jsonb_build_array(
                        split_part(path, '.', 1), to_jsonb(string_to_array(substr(path, strpos(path, '.') + 1), '.')),
                        alternative -> 'where' ->> path));
                    filters := filters || (regexp_replace(path, '^.*\.', '') || '=' || (alternative -> 'where' ->> path));
                END LOOP;
            END IF;
            matchers := matchers || jsonb_build_array(jsonb_build_object(
                'step', i - 1, 'kind', CASE WHEN alternative ? 'event' THEN 'track' ELSE 'screen' END,
                'name', coalesce(alternative ->> 'event', alternative ->> 'screen'), 'conditions', conditions));
            names := names || coalesce(alternative ->> 'event', alternative ->> 'screen');
            label_parts := label_parts || coalesce(alternative ->> 'event', alternative ->> 'screen');
            detail_parts := detail_parts || (coalesce(alternative ->> 'event', alternative ->> 'screen')
                || CASE WHEN cardinality(filters) = 0 THEN '' ELSE ' (' || array_to_string(filters, ', ') || ')' END);
        END LOOP;
        IF step ? 'name' AND (jsonb_typeof(step -> 'name') <> 'string' OR step ->> 'name' = '') THEN
            RAISE EXCEPTION '%: steps[%].name: expected a non-empty string', caller, i - 1 USING ERRCODE = 'invalid_parameter_value';
        END IF;
        explicit := explicit || (step ? 'name');
        plain := plain || coalesce(step ->> 'name', array_to_string(label_parts, ' | '));
        detailed := detailed || array_to_string(detail_parts, ' | ');
    END LOOP;

    -- Step names as the engine gives them: a generated name shared by two
    -- steps shows their where values, and then its position.
    labels := plain;
    FOR pass IN 0 .. 1 LOOP
        labels := ARRAY(
            SELECT CASE WHEN NOT explicit[x] AND (SELECT count(*) FROM unnest(labels) AS o WHERE o = labels[x]) > 1
                        THEN CASE pass WHEN 0 THEN detailed[x] ELSE labels[x] || ' #' || x END
                        ELSE labels[x] END
            FROM generate_series(1, n) AS x ORDER BY x);
    END LOOP;

    app := app_name;
    window_length := win;
    step_count := n;
    step_matchers := matchers;
    event_names := names;
    step_names := labels;
END $$;

-- The chain a person's level was reached along, as the engine reports it:
-- the first time the level is reached, and the latest start among the
-- chains reaching it then. [level, chain start, last step's time] in
-- microseconds: the sweep window_funnel_level was (016), keeping when each
-- level was first reached.
CREATE FUNCTION analytics.window_funnel_chain(state bigint[])
RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    win bigint;
    n integer;
    k integer;
    times bigint[];
    masks bigint[];
    best bigint[];
    next_best bigint[];
    first_time bigint[];
    first_start bigint[];
    i integer := 1;
    j integer;
    t bigint;
    s bigint;
    m integer;
BEGIN
    IF state IS NULL THEN
        RETURN ARRAY[0, NULL, NULL]::bigint[];
    END IF;
    win := state[1];
    n := state[2]::integer;
    k := (array_length(state, 1) - 2) / 2;
    IF k = 0 OR n = 0 THEN
        RETURN ARRAY[0, NULL, NULL]::bigint[];
    END IF;
    SELECT array_agg(state[1 + 2 * x] ORDER BY state[1 + 2 * x], x), array_agg(state[2 + 2 * x] ORDER BY state[1 + 2 * x], x)
    INTO times, masks FROM generate_series(1, k) AS x;
    best := array_fill(NULL::bigint, ARRAY[n]);
    first_time := best;
    first_start := best;
    WHILE i <= k LOOP
        t := times[i];
        j := i;
        WHILE j < k AND times[j + 1] = t LOOP
            j := j + 1;
        END LOOP;
        next_best := best;
        FOR l IN 0 .. n - 1 LOOP
            IF l = 0 THEN
                s := t;
            ELSIF best[l] IS NULL OR t - best[l] > win THEN
                CONTINUE;
            ELSE
                s := best[l];
            END IF;
            IF i = j THEN
                m := CASE WHEN (masks[i] >> l) & 1 = 1 THEN 1 ELSE 0 END;
            ELSE
                m := analytics.window_funnel_fill(masks[i:j], l, n);
            END IF;
            FOR q IN 1 .. m LOOP
                IF next_best[l + q] IS NULL OR s > next_best[l + q] THEN
                    next_best[l + q] := s;
                END IF;
            END LOOP;
        END LOOP;
        FOR l IN 1 .. n LOOP
            IF first_time[l] IS NULL AND next_best[l] IS NOT NULL THEN
                first_time[l] := t;
                first_start[l] := next_best[l];
            END IF;
        END LOOP;
        best := next_best;
        i := j + 1;
    END LOOP;
    FOR l IN REVERSE n .. 1 LOOP
        IF best[l] IS NOT NULL THEN
            RETURN ARRAY[l, first_start[l], first_time[l]];
        END IF;
    END LOOP;
    RETURN ARRAY[0, NULL, NULL]::bigint[];
END $$;

-- The level alone is the chain's first element: one sweep serves both.
-- PL/pgSQL, whose body is resolved when it runs: on Citus the functions are
-- copied to the workers one by one, and this one may go before the chain's.
CREATE OR REPLACE FUNCTION analytics.window_funnel_level(state bigint[])
RETURNS integer LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (analytics.window_funnel_chain(state))[1]::integer;
END $$;

CREATE AGGREGATE analytics.window_funnel_chain_masks(interval, timestamptz, bigint, integer) (
    SFUNC = analytics.window_funnel_add_mask,
    STYPE = bigint[],
    FINALFUNC = analytics.window_funnel_chain
);

-- funnel_report, its definition checked by the shared function.
CREATE OR REPLACE FUNCTION analytics.funnel_report(definition jsonb, as_of timestamptz DEFAULT now())
RETURNS TABLE (step_index integer, step_name text, persons bigint, conversion_from_previous double precision,
               conversion_from_start double precision, drop_off bigint, in_progress bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    d record;
BEGIN
    d := analytics.funnel_sql_definition(definition, 'funnel_report');
    RETURN QUERY
    WITH m AS MATERIALIZED (
        SELECT (x ->> 'step')::integer AS step, x ->> 'kind' AS kind, x ->> 'name' AS name, x -> 'conditions' AS conditions
        FROM jsonb_array_elements(d.step_matchers) AS x
    ), hits AS (
        SELECT e.person_id, e."timestamp" AS ts, k.mask
        FROM analytics.events AS e
        CROSS JOIN LATERAL (
            SELECT bit_or(1::bigint << m.step) AS mask FROM m
            WHERE m.kind = e.type AND m.name = e.event
              AND (jsonb_array_length(m.conditions) = 0
                   OR analytics.funnel_conditions_hold(m.conditions, e.properties, e.context, e.traits))
        ) AS k
        WHERE e.app = d.app AND e.event = ANY (d.event_names) AND e.type IN ('track', 'screen') AND k.mask IS NOT NULL
    ), levels AS (
        SELECT analytics.window_funnel_masks(d.window_length, h.ts, h.mask, d.step_count) AS level,
               max(h.ts) FILTER (WHERE h.mask & 1 = 1) AS last_start
        FROM hits AS h GROUP BY h.person_id
    ), reached AS (
        SELECT l.level, l.level < d.step_count AND l.last_start + d.window_length > as_of AS open FROM levels AS l WHERE l.level >= 1
    ), counts AS (
        SELECT s AS idx,
               count(*) FILTER (WHERE r.level >= s) AS at_step,
               count(*) FILTER (WHERE r.level = s AND s < d.step_count AND NOT r.open) AS dropped,
               count(*) FILTER (WHERE r.level = s AND r.open) AS open_here
        FROM generate_series(1, d.step_count) AS s LEFT JOIN reached AS r ON true
        GROUP BY s
    )
    SELECT c.idx, d.step_names[c.idx], c.at_step,
           CASE WHEN c.idx = 1 THEN (CASE WHEN c.at_step > 0 THEN 1.0::double precision END)
                ELSE c.at_step::double precision / NULLIF(lag(c.at_step) OVER (ORDER BY c.idx), 0) END,
           c.at_step::double precision / NULLIF(first_value(c.at_step) OVER (ORDER BY c.idx), 0),
           c.dropped, c.open_here
    FROM counts AS c ORDER BY c.idx;
END $$;

-- The persons of one cell of that report: step is its row (from 1),
-- outcome reached, converted, dropped or in_progress, at as_of; the columns
-- of analytics.funnel_step_persons. Persons are analytics.events'
-- person_id (merged as of the last nightly run); the cohort day is the day,
-- in the session's time zone, of their first step-1 event; breakdown is
-- empty (the definition's breakdowns are not evaluated in SQL).
CREATE FUNCTION analytics.funnel_report_persons(definition jsonb, step integer, outcome text, as_of timestamptz DEFAULT now())
RETURNS TABLE (person_id text, group_id text, ids text[], cohort_day date, chain_start timestamptz,
               last_step_index integer, last_step_name text, last_step_time timestamptz,
               seconds_since_last_step double precision, breakdown jsonb)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    d record;
BEGIN
    d := analytics.funnel_sql_definition(definition, 'funnel_report_persons');
    IF outcome IS NULL OR outcome NOT IN ('reached', 'converted', 'dropped', 'in_progress') THEN
        RAISE EXCEPTION 'funnel_report_persons: outcome: unknown outcome ''%'' (expected reached, converted, dropped or in_progress)', outcome
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF step IS NULL OR step < 1 OR step > d.step_count THEN
        RAISE EXCEPTION 'funnel_report_persons: step: % is out of range (the funnel''s rows are 1 to %)', step, d.step_count
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF outcome = 'converted' AND step = d.step_count THEN
        RAISE EXCEPTION 'funnel_report_persons: outcome: converted:%: step % is the last required step, no one converts from it (reached lists who got there)', step, step
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH m AS MATERIALIZED (
        SELECT (x ->> 'step')::integer AS step, x ->> 'kind' AS kind, x ->> 'name' AS name, x -> 'conditions' AS conditions
        FROM jsonb_array_elements(d.step_matchers) AS x
    ), hits AS (
        SELECT e.person_id, e."timestamp" AS ts, k.mask
        FROM analytics.events AS e
        CROSS JOIN LATERAL (
            SELECT bit_or(1::bigint << m.step) AS mask FROM m
            WHERE m.kind = e.type AND m.name = e.event
              AND (jsonb_array_length(m.conditions) = 0
                   OR analytics.funnel_conditions_hold(m.conditions, e.properties, e.context, e.traits))
        ) AS k
        WHERE e.app = d.app AND e.event = ANY (d.event_names) AND e.type IN ('track', 'screen') AND k.mask IS NOT NULL
    ), chains AS (
        SELECT h.person_id, analytics.window_funnel_chain_masks(d.window_length, h.ts, h.mask, d.step_count) AS chain,
               min(h.ts) FILTER (WHERE h.mask & 1 = 1) AS first_start,
               max(h.ts) FILTER (WHERE h.mask & 1 = 1) AS last_start
        FROM hits AS h GROUP BY h.person_id
    ), listed AS MATERIALIZED (
        SELECT c.person_id, c.first_start, c.chain[1]::integer AS level,
               timestamptz 'epoch' + c.chain[2] * interval '1 microsecond' AS chain_start,
               timestamptz 'epoch' + c.chain[3] * interval '1 microsecond' AS at
        FROM chains AS c
        WHERE c.chain[1] >= 1
          AND CASE outcome
                WHEN 'reached' THEN c.chain[1] >= step
                WHEN 'converted' THEN c.chain[1] > step
                WHEN 'dropped' THEN c.chain[1] = step AND step < d.step_count AND NOT (c.last_start + d.window_length > as_of)
                ELSE c.chain[1] = step AND step < d.step_count AND c.last_start + d.window_length > as_of
              END
    ), merged AS (
        SELECT p.person_id, array_agg(p.id ORDER BY p.id COLLATE "C") AS ids
        FROM analytics.person_ids AS p
        WHERE p.app = d.app AND p.person_id IN (SELECT l.person_id FROM listed AS l)
        GROUP BY p.person_id
    )
    SELECT l.person_id, NULL::text, l.person_id || coalesce(g.ids, '{}'::text[]), l.first_start::date, l.chain_start, l.level,
           d.step_names[l.level], l.at, extract(epoch FROM as_of - l.at)::double precision, '{}'::jsonb
    FROM listed AS l LEFT JOIN merged AS g ON g.person_id = l.person_id
    ORDER BY l.at DESC, l.person_id COLLATE "C";
END $$;

GRANT EXECUTE ON FUNCTION analytics.funnel_sql_definition(jsonb, text), analytics.window_funnel_chain(bigint[]),
    analytics.window_funnel_chain_masks(interval, timestamptz, bigint, integer),
    analytics.funnel_report_persons(jsonb, integer, text, timestamptz)
    TO onramp_analyst, onramp_operator, onramp_reader;
